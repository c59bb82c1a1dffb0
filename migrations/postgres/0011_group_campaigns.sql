-- Group campaigns (D-038): the group a campaign was made for, how it uses the group's numbers
-- (`all` together or `sequential`, one at a time), and when a scheduled campaign starts.
ALTER TABLE campaigns ADD COLUMN group_id BIGINT REFERENCES sending_groups (id);
ALTER TABLE campaigns ADD COLUMN mode TEXT NOT NULL DEFAULT 'all';
ALTER TABLE campaigns ADD COLUMN scheduled_at BIGINT;
CREATE INDEX campaigns_scheduled ON campaigns (state, scheduled_at);
