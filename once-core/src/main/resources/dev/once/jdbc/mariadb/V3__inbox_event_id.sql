-- once schema, version 3, MariaDB: the inbox column holds the producer's event id, never a
-- broker message id, so it is named for what it holds. A rename keeps the rows and the primary key.
ALTER TABLE ${prefix}inbox RENAME COLUMN IF EXISTS message_id TO event_id;
