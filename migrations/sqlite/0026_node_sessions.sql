-- Several processes on one database (issue 50, D-100). Each `disparo serve` process registers a
-- session at boot and renews its heartbeat every second; a session whose heartbeat is older
-- than the session TTL (or that ended) is gone. What a process holds is marked with its
-- session, so a booting process recovers only what gone sessions left: claimed campaign
-- recipients, pending idempotency keys, webhook subscriptions being delivered.
CREATE TABLE node_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    node TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    ended_at BIGINT
);
-- The session that claimed a recipient (its provider call is that process's business).
ALTER TABLE campaign_recipients ADD COLUMN claim_session BIGINT;
-- The session running the first request of an idempotency key.
ALTER TABLE idempotency_keys ADD COLUMN session_id BIGINT;
-- The session delivering a subscription's webhooks, until when (ms, database clock): one
-- process at a time attempts a subscription's deliveries, so none is POSTed by two and each
-- conversation's order holds.
ALTER TABLE webhook_subscriptions ADD COLUMN lease_session BIGINT;
ALTER TABLE webhook_subscriptions ADD COLUMN lease_until BIGINT;
