-- disparo initial schema. Timestamps are integer milliseconds since the Unix epoch (UTC);
-- JSON columns are TEXT; booleans are integers 0/1 (the same in both dialects).

CREATE TABLE accounts (
    id BIGSERIAL PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    level TEXT NOT NULL DEFAULT 'admin',
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_tokens_account ON api_tokens (account_id);

CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    token_name TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    status BIGINT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX audit_log_account ON audit_log (account_id, id);

CREATE TABLE channels (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    phone TEXT NOT NULL,
    official BIGINT NOT NULL DEFAULT 1,
    engine TEXT NOT NULL DEFAULT 'cloud_api',
    status TEXT NOT NULL,
    quality TEXT NOT NULL,
    tier TEXT,
    phone_number_id TEXT NOT NULL UNIQUE,
    waba_id TEXT NOT NULL,
    verified_name TEXT NOT NULL DEFAULT '',
    access_token_enc TEXT NOT NULL,
    app_secret_enc TEXT,
    verify_token TEXT NOT NULL,
    credential_valid BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    last_sync_at BIGINT
);
CREATE INDEX channels_account ON channels (account_id, id);

CREATE TABLE conversations (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    contact_phone TEXT NOT NULL,
    contact_name TEXT,
    last_inbound_at BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (channel_id, contact_phone)
);

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    conversation_id BIGINT NOT NULL REFERENCES conversations (id),
    direction TEXT NOT NULL,
    kind TEXT NOT NULL,
    contact_phone TEXT NOT NULL,
    body TEXT,
    template_name TEXT,
    template_language TEXT,
    params TEXT,
    preview_text TEXT,
    media TEXT,
    status TEXT NOT NULL,
    provider_message_id TEXT,
    error_code BIGINT,
    error_title TEXT,
    error_detail TEXT,
    source TEXT NOT NULL DEFAULT 'api',
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    delivered_at BIGINT,
    read_at BIGINT,
    failed_at BIGINT
);
CREATE UNIQUE INDEX messages_provider_message_id ON messages (provider_message_id);
CREATE INDEX messages_channel_created ON messages (channel_id, created_at);
CREATE INDEX messages_account_created ON messages (account_id, created_at);

CREATE TABLE webhook_subscriptions (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret_enc TEXT NOT NULL,
    active BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_subscriptions_channel ON webhook_subscriptions (channel_id);

CREATE TABLE webhook_deliveries (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    subscription_id BIGINT NOT NULL REFERENCES webhook_subscriptions (id),
    event TEXT NOT NULL,
    channel TEXT NOT NULL,
    data TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    last_status_code BIGINT,
    last_error TEXT,
    next_attempt_at BIGINT,
    delivered_at BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, id);
