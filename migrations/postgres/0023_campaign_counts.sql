-- A campaign's counters without a count over its audience (issue 25, D-091).
--
-- `GET /campaigns/{id}` counted the campaign's recipients by state and its messages by status
-- at every call: on PostgreSQL two grouped counts that visit every row version of the audience
-- (80–100 ms each at 100,000 recipients while the campaign runs), 23 % of the database's time
-- in a 100k campaign polled twice a second. Here every statement that adds, changes or removes
-- recipients, or changes or removes campaign messages, appends what it changed, per campaign
-- and state (or status), to `campaign_counts`, in its own transaction: statement triggers over
-- the statement's transition tables, +1 for each row after and -1 for each row before, summed
-- per campaign and value (a row left as it was cancels out; no join of the two tables, no
-- shared row to lock). The counters are the sums of a campaign's rows: exact as of the reader's
-- snapshot, whatever path changed a row.
--
-- Messages count only in the statuses the counters report (sent, delivered, read), and only
-- from their updates: a campaign message is inserted `queued` (`claim_chunk` in storage/src/campaigns.rs), so an insert never
-- changes a counter and 1:1 sends' inserts pay for no trigger.
CREATE TABLE campaign_counts (
    id BIGSERIAL PRIMARY KEY,
    campaign_id BIGINT NOT NULL,
    -- 'state' (a recipient's state) or 'status' (a campaign message's status).
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    n BIGINT NOT NULL
);
CREATE INDEX campaign_counts_campaign ON campaign_counts (campaign_id);

INSERT INTO campaign_counts (campaign_id, kind, value, n)
    SELECT campaign_id, 'state', state, COUNT(*) FROM campaign_recipients GROUP BY campaign_id, state;
INSERT INTO campaign_counts (campaign_id, kind, value, n)
    SELECT campaign_id, 'status', status, COUNT(*) FROM messages
        WHERE campaign_id IS NOT NULL AND status IN ('sent', 'delivered', 'read') GROUP BY campaign_id, status;

CREATE FUNCTION campaign_counts_recipients_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, kind, value, n)
        SELECT campaign_id, 'state', state, COUNT(*) FROM added GROUP BY campaign_id, state;
    RETURN NULL;
END $$;

CREATE FUNCTION campaign_counts_recipients_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, kind, value, n)
        SELECT campaign_id, 'state', state, SUM(d) FROM (
            SELECT campaign_id, state, 1 AS d FROM after_rows
            UNION ALL
            SELECT campaign_id, state, -1 AS d FROM before_rows
        ) x GROUP BY campaign_id, state HAVING SUM(d) <> 0;
    RETURN NULL;
END $$;

CREATE FUNCTION campaign_counts_recipients_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, kind, value, n)
        SELECT campaign_id, 'state', state, -COUNT(*) FROM removed GROUP BY campaign_id, state;
    RETURN NULL;
END $$;

CREATE TRIGGER campaign_counts_recipients_added AFTER INSERT ON campaign_recipients
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_recipients_added();
CREATE TRIGGER campaign_counts_recipients_changed AFTER UPDATE ON campaign_recipients
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_recipients_changed();
CREATE TRIGGER campaign_counts_recipients_removed AFTER DELETE ON campaign_recipients
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_recipients_removed();

CREATE FUNCTION campaign_counts_messages_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, kind, value, n)
        SELECT campaign_id, 'status', status, SUM(d) FROM (
            SELECT campaign_id, status, 1 AS d FROM after_rows
                WHERE campaign_id IS NOT NULL AND status IN ('sent', 'delivered', 'read')
            UNION ALL
            SELECT campaign_id, status, -1 AS d FROM before_rows
                WHERE campaign_id IS NOT NULL AND status IN ('sent', 'delivered', 'read')
        ) x GROUP BY campaign_id, status HAVING SUM(d) <> 0;
    RETURN NULL;
END $$;

CREATE FUNCTION campaign_counts_messages_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, kind, value, n)
        SELECT campaign_id, 'status', status, -COUNT(*) FROM removed
            WHERE campaign_id IS NOT NULL AND status IN ('sent', 'delivered', 'read') GROUP BY campaign_id, status;
    RETURN NULL;
END $$;

CREATE TRIGGER campaign_counts_messages_changed AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_messages_changed();
CREATE TRIGGER campaign_counts_messages_removed AFTER DELETE ON messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION campaign_counts_messages_removed();

-- Status updates without index maintenance. A campaign message's row is updated after its
-- insert by its settlement and its statuses; with `status` in an index (only the counts above
-- used it), each was a new row version in all five indexes of `messages`. Without it, an update
-- that changes no indexed column (each status after the settlement) is a heap-only (HOT)
-- update when its page has room, which the fill factor keeps.
DROP INDEX messages_campaign;
CREATE INDEX messages_campaign ON messages (campaign_id);
ALTER TABLE messages SET (fillfactor = 80);
