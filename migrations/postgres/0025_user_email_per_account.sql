-- A panel user's e-mail is unique within its account, not across accounts (issue 46: another
-- tenant must not learn that an address is in use).
ALTER TABLE users DROP CONSTRAINT users_email_key;
ALTER TABLE users ADD CONSTRAINT users_account_email_key UNIQUE (account_id, email);
CREATE INDEX users_email ON users (email);
