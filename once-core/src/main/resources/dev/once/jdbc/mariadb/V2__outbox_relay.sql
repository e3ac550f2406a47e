-- once schema, version 2, MariaDB: what the outbox relay needs (no wake-ups: relays poll).

ALTER TABLE ${prefix}outbox ADD COLUMN response_status integer, ADD COLUMN response text,
    ADD KEY ${prefix}outbox_key (msg_key, status, id), ADD KEY ${prefix}outbox_sent_at (status, sent_at);
