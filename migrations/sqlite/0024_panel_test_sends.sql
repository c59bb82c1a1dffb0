-- Each test send of a panel campaign (issue 46): who sent it, to whom, which message. Limits
-- per campaign and per user are counted from here, and it is the audit of each destination.
CREATE TABLE panel_test_sends (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    campaign_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    destination TEXT NOT NULL,
    message_id BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX panel_test_sends_campaign ON panel_test_sends (campaign_id, created_at);
CREATE INDEX panel_test_sends_user ON panel_test_sends (user_id, created_at);
