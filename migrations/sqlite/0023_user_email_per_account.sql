-- A panel user's e-mail is unique within its account, not across accounts (issue 46: another
-- tenant must not learn that an address is in use). SQLite cannot drop a column's UNIQUE, so
-- the table is rebuilt. Migrations run in a transaction, where foreign keys cannot be switched
-- off: the old table is renamed with the legacy rename (the other tables' references keep
-- naming `users`, which becomes the new table), then dropped (nothing references it then).
PRAGMA legacy_alter_table = ON;
DROP INDEX users_account;
ALTER TABLE users RENAME TO users_before_0023;
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    email TEXT NOT NULL,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    password_hash TEXT NOT NULL,
    client_id BIGINT REFERENCES clients (id),
    bm_scope TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, email)
);
INSERT INTO users (id, account_id, email, name, role, status, password_hash, client_id, bm_scope, created_at, updated_at)
    SELECT id, account_id, email, name, role, status, password_hash, client_id, bm_scope, created_at, updated_at FROM users_before_0023;
DROP TABLE users_before_0023;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX users_account ON users (account_id, id);
CREATE INDEX users_email ON users (email);
