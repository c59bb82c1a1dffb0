-- Panel campaigns (issue 20, D-062): the account API's campaigns with the panel's flow on top
-- (contact hygiene, approval, volume, the dispatch switch). One campaign row, one recipient
-- row per contact: the panel adds columns, not a second copy.

ALTER TABLE campaigns ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
ALTER TABLE campaigns ADD COLUMN stage TEXT;
ALTER TABLE campaigns ADD COLUMN volume BIGINT;
ALTER TABLE campaigns ADD COLUMN created_by BIGINT;
ALTER TABLE campaigns ADD COLUMN approved_by BIGINT;
ALTER TABLE campaigns ADD COLUMN approved_at BIGINT;
ALTER TABLE campaigns ADD COLUMN hygiene_job TEXT;
ALTER TABLE campaigns ADD COLUMN hygiene_submitted_at BIGINT;
ALTER TABLE campaigns ADD COLUMN hygiene_error TEXT;
ALTER TABLE campaigns ADD COLUMN image_url TEXT;
ALTER TABLE campaigns ADD COLUMN button_var TEXT;
ALTER TABLE campaigns ADD COLUMN held BIGINT NOT NULL DEFAULT 0;
CREATE INDEX campaigns_origin ON campaigns (account_id, origin, id);

ALTER TABLE campaign_recipients ADD COLUMN contact_name TEXT;
ALTER TABLE campaign_recipients ADD COLUMN hygiene TEXT;
ALTER TABLE campaign_recipients ADD COLUMN hygiene_reason TEXT;
ALTER TABLE campaign_recipients ADD COLUMN wa_id TEXT;
CREATE INDEX campaign_recipients_hygiene ON campaign_recipients (campaign_id, hygiene, id);

-- The account's dispatch switch as an Admin set it (`PUT /api/settings/dispatch`); NULL: the
-- process's DISPARO_ENABLED (default on) decides.
ALTER TABLE accounts ADD COLUMN dispatch_enabled BIGINT;
