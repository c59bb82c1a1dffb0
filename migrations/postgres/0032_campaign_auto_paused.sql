-- A campaign paused by its own rules (no number could send) rather than by an operator
-- (D-123): whoever coordinates it keeps checking for a recovery, also after a restart or a
-- hand-off between nodes. 1 only while `state = 'paused'` for that reason.
ALTER TABLE campaigns ADD COLUMN auto_paused BIGINT NOT NULL DEFAULT 0;
