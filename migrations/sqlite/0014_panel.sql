-- The operator panel (issue 19, D-054…): clients, panel users and their sessions, support
-- tasks; BMs gain their own credential and client; WABAs and numbers gain a client and an
-- operator status. Every panel record belongs to an account: the BMs, WABAs and channels
-- below are the very records the account API serves.

CREATE TABLE clients (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    document TEXT,
    webhook_url TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    password_hash TEXT NOT NULL,
    client_id BIGINT REFERENCES clients (id),
    bm_scope TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX users_account ON users (account_id, id);

CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id),
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    priority TEXT NOT NULL,
    position BIGINT NOT NULL,
    assignee_id BIGINT REFERENCES users (id),
    bm_id BIGINT REFERENCES bms (id),
    waba_id BIGINT REFERENCES wabas (id),
    channel_id BIGINT REFERENCES channels (id),
    campaign_id BIGINT REFERENCES campaigns (id),
    created_by BIGINT REFERENCES users (id),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX tasks_account ON tasks (account_id, status, position);

ALTER TABLE bms ADD COLUMN client_id BIGINT REFERENCES clients (id);
ALTER TABLE bms ADD COLUMN app_id TEXT;
ALTER TABLE bms ADD COLUMN access_token_enc TEXT;
ALTER TABLE bms ADD COLUMN app_secret_enc TEXT;
ALTER TABLE bms ADD COLUMN has_provider_id BIGINT NOT NULL DEFAULT 1;
ALTER TABLE bms ADD COLUMN health_status TEXT;
ALTER TABLE wabas ADD COLUMN client_id BIGINT REFERENCES clients (id);
ALTER TABLE wabas ADD COLUMN status TEXT NOT NULL DEFAULT 'ativa';
ALTER TABLE channels ADD COLUMN client_id BIGINT REFERENCES clients (id);
ALTER TABLE channels ADD COLUMN photo_url TEXT;
