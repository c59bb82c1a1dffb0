-- The provider's message id in a narrow table of its own (issue 54, D-135).
--
-- A campaign message's settlement writes its provider id (`wamid`). With that column in a
-- unique index of `messages`, the update wrote a new entry in each of the table's five
-- indexes; without it, and with room on the row's page (fill factor 50), the settlement and
-- the statuses after it are heap-only updates, and the id's one index entry is written here.
-- Every writer of `messages.provider_message_id` records it here in the same transaction
-- (`messages::record_provider_ids_tx`; an inbound message's insert is keyed on it, so a
-- provider retry records nothing), and every lookup by provider id reads this table
-- (storage/src/messages.rs). Statement triggers over the transition tables did the same at
-- six times the status update's cost (D-135). Only pages written from now on get the new fill
-- factor. SQLite keeps its unique index (its writes are in-process; D-135).
CREATE TABLE message_provider_ids (
    provider_message_id TEXT PRIMARY KEY,
    message_id BIGINT NOT NULL
);
INSERT INTO message_provider_ids (provider_message_id, message_id)
    SELECT provider_message_id, id FROM messages WHERE provider_message_id IS NOT NULL;

DROP INDEX messages_provider_message_id;
ALTER TABLE messages SET (fillfactor = 50);
