-- Provider webhook fields acted on (issue 16, D-074).
-- A template's quality per number (message_template_quality_update): GREEN, YELLOW, RED, UNKNOWN.
ALTER TABLE template_channels ADD COLUMN quality TEXT;
-- account_alerts, kept per account and listed in the overview's needs_action.
CREATE TABLE provider_alerts (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    waba_id TEXT NOT NULL,
    entity_type TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    alert_type TEXT NOT NULL,
    severity TEXT NOT NULL,
    status TEXT NOT NULL,
    description TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX provider_alerts_account ON provider_alerts (account_id, received_at);
-- Contacts who asked the business to stop marketing messages (user_preferences); marketing
-- campaigns skip them.
CREATE TABLE contact_opt_outs (
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    phone TEXT NOT NULL,
    category TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, phone, category)
);
