-- Numbers of an alternative provider, referenced only (D-034): where their provider's API
-- lives, the templates last read from their sender, each account's notification key, and the
-- notifications received.
ALTER TABLE channels ADD COLUMN provider_url TEXT;

CREATE TABLE channel_sender_templates (
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    name TEXT NOT NULL,
    language TEXT NOT NULL,
    status TEXT NOT NULL,
    category TEXT NOT NULL,
    components TEXT NOT NULL,
    synced_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, name, language)
);

CREATE TABLE alternative_notify_keys (
    account_id BIGINT PRIMARY KEY REFERENCES accounts (id),
    notify_key TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE alternative_notifications (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT REFERENCES accounts (id),
    channel_id BIGINT REFERENCES channels (id),
    via TEXT NOT NULL,
    body TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX alternative_notifications_account ON alternative_notifications (account_id, id);
