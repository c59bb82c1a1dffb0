-- A recipient's two updates heap-only (issue 54, D-137).
--
-- A campaign message moved its recipient twice (`planned` → `claimed` at the claim, →
-- `sent`/`failed`/… at the settlement), and `state` was indexed, so each update wrote a new
-- row version with an entry in every one of the table's four indexes: about 1.3 kB of the
-- log per message, a third of what a campaign message cost the database. With no index
-- naming `state` (nor any column the two updates change) and room on each page, both updates
-- are heap-only: in isolation (100,000 recipients claimed and settled 512 at a time) 139 MB
-- of log → 49 MB.
--
-- What read the index now reads otherwise: the claim walks `(campaign_id, id)` from a cursor
-- its campaign's actor keeps (`claim_recipients_after`); a campaign's open work and its
-- in-doubt count come from its counters (`campaign_counts`, D-091); the scan for stale claims
-- runs a few times per in-doubt grace, not every second. SQLite keeps its index.
DROP INDEX IF EXISTS campaign_recipients_state;

-- New pages half full: the room each recipient's next versions take (pages written before
-- stay as they are).
ALTER TABLE campaign_recipients SET (fillfactor = 50);

-- The recipients a resend pinned to a number (few, and the column is written only by the
-- resend): found without reading the rest of the audience — the pinned claim and the check of
-- which numbers have pinned work, run at every sweep in cluster mode.
CREATE INDEX campaign_recipients_pinned ON campaign_recipients (campaign_id, id)
    WHERE pinned_channel_id IS NOT NULL;
