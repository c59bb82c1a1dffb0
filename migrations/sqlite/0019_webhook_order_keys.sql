-- Per-conversation order of webhook deliveries (issue 17, D-065): deliveries of one
-- subscription with the same key are attempted in order; different keys run side by side.
-- Rows written before keep '' (one key: the strict per-subscription order they had).
ALTER TABLE webhook_deliveries ADD COLUMN order_key TEXT NOT NULL DEFAULT '';
