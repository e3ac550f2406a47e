-- once schema, version 2, MariaDB: what the outbox relay needs (no wake-ups: relays poll).

ALTER TABLE ${prefix}outbox ADD COLUMN IF NOT EXISTS response_status integer, ADD COLUMN IF NOT EXISTS response text,
    ADD KEY IF NOT EXISTS ${prefix}outbox_key (msg_key, status, id), ADD KEY IF NOT EXISTS ${prefix}outbox_sent_at (status, sent_at);
