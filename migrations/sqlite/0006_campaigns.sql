-- Campaigns, their numbers with weights, and their audience (one row per recipient).
CREATE TABLE campaigns (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    template_id BIGINT NOT NULL REFERENCES templates (id),
    var_map TEXT NOT NULL,
    state TEXT NOT NULL,
    pause_reason TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX campaigns_account ON campaigns (account_id, id);

CREATE TABLE campaign_channels (
    campaign_id BIGINT NOT NULL REFERENCES campaigns (id),
    channel_id BIGINT NOT NULL REFERENCES channels (id),
    weight BIGINT NOT NULL,
    PRIMARY KEY (campaign_id, channel_id)
);

CREATE TABLE campaign_recipients (
    id INTEGER PRIMARY KEY,
    campaign_id BIGINT NOT NULL REFERENCES campaigns (id),
    phone TEXT NOT NULL,
    vars TEXT NOT NULL,
    state TEXT NOT NULL,
    channel_id BIGINT,
    message_id BIGINT,
    error TEXT,
    updated_at BIGINT NOT NULL,
    UNIQUE (campaign_id, phone)
);
CREATE INDEX campaign_recipients_state ON campaign_recipients (campaign_id, state, id);

ALTER TABLE messages ADD COLUMN campaign_id BIGINT;
CREATE INDEX messages_campaign ON messages (campaign_id, status);
