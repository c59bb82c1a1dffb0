-- Sending groups (D-037): a pool of an account's numbers with a shared 24 h limit (NULL: the
-- sum of its numbers' limits). A number is in at most one group.
CREATE TABLE sending_groups (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    limit_24h BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, name)
);
ALTER TABLE channels ADD COLUMN group_id BIGINT REFERENCES sending_groups (id);
CREATE INDEX channels_group ON channels (group_id);
