-- The public sender (issue 22, D-060): per-user API tokens an Admin generates, and which
-- user sent which message through them.

CREATE TABLE user_api_tokens (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    user_id BIGINT NOT NULL REFERENCES users (id),
    prefix TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_by BIGINT,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX user_api_tokens_user ON user_api_tokens (user_id);

CREATE TABLE sender_messages (
    message_id BIGINT PRIMARY KEY REFERENCES messages (id),
    user_id BIGINT NOT NULL REFERENCES users (id),
    token_id BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX sender_messages_user ON sender_messages (user_id, message_id);
