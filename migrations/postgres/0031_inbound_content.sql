-- The whole of an inbound message, typed per provider kind (issue 48 item 1, D-120): the JSON
-- object `message.received` carries under `message.content` and `GET /messages/{id}` answers.
-- NULL for outbound messages and for messages received before this column existed.
ALTER TABLE messages ADD COLUMN content TEXT;
