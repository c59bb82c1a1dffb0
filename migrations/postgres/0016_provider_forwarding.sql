-- The provider webhook receiver of the panel (issue 21, D-061): each client's signing secret,
-- a delivery lane per (client, number) in the outbox the account webhooks use, and the log of
-- every call the provider made.

ALTER TABLE clients ADD COLUMN webhook_secret_enc TEXT;
ALTER TABLE webhook_subscriptions ADD COLUMN client_id BIGINT REFERENCES clients (id);
CREATE INDEX webhook_subscriptions_client ON webhook_subscriptions (client_id, channel_id);
ALTER TABLE webhook_deliveries ADD COLUMN log_id BIGINT;
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (log_id);

CREATE TABLE provider_webhook_logs (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT REFERENCES accounts (id),
    kind TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    signature TEXT NOT NULL,
    http_status BIGINT NOT NULL,
    applied BIGINT NOT NULL DEFAULT 0,
    waba_ids TEXT NOT NULL DEFAULT '[]',
    phone_number_ids TEXT NOT NULL DEFAULT '[]',
    fields TEXT NOT NULL DEFAULT '[]',
    detail TEXT,
    body TEXT
);
CREATE INDEX provider_webhook_logs_account ON provider_webhook_logs (account_id, id);
