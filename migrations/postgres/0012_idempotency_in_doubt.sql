-- Idempotency keys bound to the message they sent (issue 15): a send whose outcome is unknown
-- keeps its key (state `in_doubt`) so a retry replays it instead of sending again.
ALTER TABLE idempotency_keys ADD COLUMN message_id BIGINT;
