-- once schema, version 4, PostgreSQL: per-key order holds across dead rows.

-- A dead row now holds back the later rows of its key until it is replayed (and sent first) or
-- discarded, so "an older row of the same key" means pending or dead; the index follows.
DROP INDEX ${prefix}outbox_pending_key;
CREATE INDEX ${prefix}outbox_unsent_key ON ${prefix}outbox (msg_key, id) WHERE status IN ('pending', 'dead');
