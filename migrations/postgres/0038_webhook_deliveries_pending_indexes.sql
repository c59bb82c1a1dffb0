-- The outbox's indexes name only the rows that read them (issue 54, D-143).
--
-- A delivery is written twice: inserted `pending`, then updated once it is delivered (or
-- failed). `status` led two of its five indexes, so both writes put an entry in all five,
-- and the settled row's entries stayed in the pending indexes for as long as the row was
-- kept (the retention, days), read past by every look for pending work.
--
-- Now the two queues are partial on `pending` (what reads them asks for nothing else: the
-- window per subscription in id order, the earliest due time, the backlog's size), so a
-- delivery's update adds no entry to them; the forwarding log's index holds only the
-- deliveries that forward a provider event (`log_id` is NULL for every other); failed
-- deliveries, the only ones `recover_deliveries` looks for, have an index of their own (few
-- rows). The retention's purge of settled rows reads the table in order (it used to read
-- every settled entry of the status index, no cheaper). SQLite keeps its indexes.
DROP INDEX IF EXISTS webhook_deliveries_queue;
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (subscription_id, id)
    WHERE status = 'pending';

DROP INDEX IF EXISTS webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';

DROP INDEX IF EXISTS webhook_deliveries_log;
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (log_id)
    WHERE log_id IS NOT NULL;

CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (subscription_id, created_at)
    WHERE status = 'failed';
