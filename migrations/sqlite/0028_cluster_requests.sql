-- Signed requests between nodes already served (cluster mode, issue 52, D-118): the tag of
-- every state-changing request a node accepted on a number's control subject, so a captured
-- request replayed to another node (after the number moved there) is refused there too.
-- `sent_at` is the request's own send time (ms); rows older than twice the acceptance window
-- are deleted by the keeper.
CREATE TABLE cluster_requests (
    tag TEXT PRIMARY KEY,
    sent_at INTEGER NOT NULL
);
CREATE INDEX cluster_requests_sent_at ON cluster_requests (sent_at);
