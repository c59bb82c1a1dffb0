-- A subscription that only fails is disabled after a window (issue 15): when its current run of
-- failures began, and when and why it was disabled.
ALTER TABLE webhook_subscriptions ADD COLUMN failing_since BIGINT;
ALTER TABLE webhook_subscriptions ADD COLUMN disabled_at BIGINT;
ALTER TABLE webhook_subscriptions ADD COLUMN disabled_reason TEXT;
