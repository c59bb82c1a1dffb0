-- Per-number campaign guardrails (D-031), owner/admin authorizations past the daily cap,
-- recipients pinned to a number by a resend, and in-doubt campaign sends (D-032).
ALTER TABLE channels ADD COLUMN daily_cap BIGINT DEFAULT 1000;
ALTER TABLE channels ADD COLUMN cadence_ms BIGINT NOT NULL DEFAULT 25;
ALTER TABLE channels ADD COLUMN warmup BIGINT NOT NULL DEFAULT 1;
ALTER TABLE channels ADD COLUMN warmup_started_at BIGINT;
ALTER TABLE channels ADD COLUMN warmup_initial_cap BIGINT NOT NULL DEFAULT 50;

CREATE TABLE channel_cap_authorizations (
    id INTEGER PRIMARY KEY,
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    day BIGINT NOT NULL,
    extra BIGINT NOT NULL,
    authorized_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX channel_cap_authorizations_day ON channel_cap_authorizations (channel_id, day);

ALTER TABLE campaign_recipients ADD COLUMN pinned_channel_id BIGINT;
ALTER TABLE campaign_recipients ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
