-- Business portfolios (BMs) and WABAs known to an account, and the channel state that the
-- health object needs (payment lock, BM, registration PIN).

CREATE TABLE bms (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    provider_business_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    verification_status TEXT,
    payment_ok BIGINT NOT NULL DEFAULT 1,
    payment_checked_at BIGINT,
    tier TEXT,
    last_sync_at BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, provider_business_id)
);

CREATE TABLE wabas (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    bm_id BIGINT REFERENCES bms (id),
    provider_waba_id TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    standing TEXT NOT NULL DEFAULT 'ok',
    standing_detail TEXT,
    last_upload_failure TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, provider_waba_id)
);

ALTER TABLE channels ADD COLUMN bm_id BIGINT REFERENCES bms (id);
ALTER TABLE channels ADD COLUMN payment_locked_until BIGINT;
ALTER TABLE channels ADD COLUMN pin_enc TEXT;
CREATE INDEX channels_bm ON channels (bm_id);
CREATE INDEX channels_waba ON channels (account_id, waba_id);
