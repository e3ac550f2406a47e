-- once schema, version 10, PostgreSQL: a wake-up names the schema of the row that became pending.
-- A channel is the database's, not a schema's: with a schema per tenant and the same table prefix in each, every
-- tenant's insert woke every tenant's relays, each for an empty poll. A relay whose table's trigger names its schema
-- now ignores every other wake-up (another schema's, or one naming none: a schema not yet at this version).
-- The function body stays on one line: migrations are split into statements at a ';' at line end.
CREATE OR REPLACE FUNCTION ${prefix}outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${prefix}outbox', TG_TABLE_SCHEMA); RETURN NULL; END $$;
