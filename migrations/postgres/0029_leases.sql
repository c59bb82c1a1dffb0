-- Leases with epochs (issue 52, CLUSTER.md "Leases with epochs"): one row per cell (and later
-- per campaign and singleton). A node holds a key while `expires_at` (ms, PostgreSQL's clock)
-- is ahead; renewing moves it, acquiring a free or expired key bumps `epoch`, the fencing
-- token every claim and send made under the lease carries. A released key has no owner.
CREATE TABLE leases (
    key TEXT PRIMARY KEY,
    owner_session BIGINT,
    owner_node TEXT,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL
);
CREATE INDEX leases_owner ON leases (owner_session);
