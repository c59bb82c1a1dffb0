-- Leases with epochs (issue 52, CLUSTER.md "Leases with epochs"). Cluster mode needs
-- PostgreSQL; the table is here so both schemas match (see the PostgreSQL migration 0029).
CREATE TABLE leases (
    key TEXT PRIMARY KEY,
    owner_session BIGINT,
    owner_node TEXT,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL
);
CREATE INDEX leases_owner ON leases (owner_session);
