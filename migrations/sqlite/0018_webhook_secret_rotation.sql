-- Webhook subscriptions an integrator manages (issue 17, D-064): after a secret rotation the
-- previous secret keeps signing (beside the new one) until its overlap ends.
ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_enc TEXT;
ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_until BIGINT;
