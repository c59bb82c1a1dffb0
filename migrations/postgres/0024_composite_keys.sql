-- One foreign key per row on the send path's hot tables instead of two or three (issue 25,
-- D-092). A message's account and number are its conversation's, and a conversation's account
-- is its number's: each row now names its parent by the composite key it must match, so the
-- database checks one key per inserted row and refuses a row whose account and number
-- disagree (the separate keys accepted that). Every check is a query and a `FOR KEY SHARE`
-- lock per row; at 100k campaign messages they were ~580k checks, all locking the same
-- account row. SQLite keeps its per-column keys (its checks are in-process index probes).

-- A number is unique within its account (replaces the plain index on the same columns).
CREATE UNIQUE INDEX channels_account_key ON channels (account_id, id);
DROP INDEX channels_account;

-- conversations: (account, number) must be a number of that account.
ALTER TABLE conversations
    ADD CONSTRAINT conversations_channel_account_fkey
        FOREIGN KEY (account_id, channel_id) REFERENCES channels (account_id, id);
ALTER TABLE conversations
    DROP CONSTRAINT conversations_account_id_fkey,
    DROP CONSTRAINT conversations_channel_id_fkey;
CREATE UNIQUE INDEX conversations_thread_key ON conversations (id, channel_id, account_id);

-- messages: (conversation, number, account) must be that conversation's.
ALTER TABLE messages
    ADD CONSTRAINT messages_conversation_thread_fkey
        FOREIGN KEY (conversation_id, channel_id, account_id)
        REFERENCES conversations (id, channel_id, account_id);
ALTER TABLE messages
    DROP CONSTRAINT messages_account_id_fkey,
    DROP CONSTRAINT messages_channel_id_fkey,
    DROP CONSTRAINT messages_conversation_id_fkey;

-- webhook_deliveries: (account, subscription) must be a subscription of that account.
CREATE UNIQUE INDEX webhook_subscriptions_account_key ON webhook_subscriptions (account_id, id);
ALTER TABLE webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_subscription_account_fkey
        FOREIGN KEY (account_id, subscription_id) REFERENCES webhook_subscriptions (account_id, id);
ALTER TABLE webhook_deliveries
    DROP CONSTRAINT webhook_deliveries_account_id_fkey,
    DROP CONSTRAINT webhook_deliveries_subscription_id_fkey;
