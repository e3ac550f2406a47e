-- once schema, version 2, PostgreSQL: what the outbox relay needs.

-- The destination's answer to the last send (HTTP status and body, broker receipt), for audit.
ALTER TABLE ${prefix}outbox ADD COLUMN response_status integer;
ALTER TABLE ${prefix}outbox ADD COLUMN response text;

-- The relay sends only the oldest pending row of each key; this finds "an older pending row of
-- the same key" with one index probe.
CREATE INDEX ${prefix}outbox_pending_key ON ${prefix}outbox (msg_key, id) WHERE status = 'pending';
-- Operators list dead rows; without this they would scan every sent row.
CREATE INDEX ${prefix}outbox_dead ON ${prefix}outbox (id) WHERE status = 'dead';
-- Retention of sent rows.
CREATE INDEX ${prefix}outbox_sent_at ON ${prefix}outbox USING brin (sent_at);

-- Wakes relays (LISTEN ${prefix}outbox) as soon as a row becomes pending, whoever wrote it;
-- polling stays the fallback. pg_notify folds identical notifications of one transaction into one.
-- The function body stays on one line: migrations are split into statements at a ';' at line end.
CREATE FUNCTION ${prefix}outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${prefix}outbox', ''); RETURN NULL; END $$;
CREATE TRIGGER ${prefix}outbox_notify AFTER INSERT OR UPDATE OF status ON ${prefix}outbox
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION ${prefix}outbox_notify();
