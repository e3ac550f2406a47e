-- once schema, version 10, PostgreSQL: a wake-up names the schema of the row that became pending.
-- A channel is the database's, not a schema's: with a schema per tenant and the same table prefix in each, every
-- tenant's insert woke every tenant's relays, each for an empty poll. A relay now ignores the wake-ups of other
-- schemas (one with an empty payload, from a schema not yet at this version, still wakes it).
-- The function body stays on one line: migrations are split into statements at a ';' at line end.
CREATE OR REPLACE FUNCTION ${prefix}outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${prefix}outbox', TG_TABLE_SCHEMA); RETURN NULL; END $$;
