-- Deliveries are attempted in order per subscription (the head of each queue first).
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (subscription_id, status, id);

-- Idempotency keys of POST /messages: the first answer is kept for 24 hours.
CREATE TABLE idempotency_keys (
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    response_status BIGINT,
    response_body TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, idem_key)
);
