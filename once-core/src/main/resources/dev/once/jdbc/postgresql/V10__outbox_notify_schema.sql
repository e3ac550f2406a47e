-- once schema, version 10, PostgreSQL: a wake-up names the schema of the row that became pending.
-- A channel is the database's, not a schema's: with a schema per tenant and the same table prefix in each, every
-- tenant's insert woke every tenant's relays, each for an empty poll. A relay whose table's trigger names its schema
-- now ignores every other wake-up (another schema's, or one naming none: a schema not yet at this version).
-- The lock first: a transaction that wrote an outbox row before this migration and commits after it would send the
-- old empty payload for this schema's row, which a relay that LISTENed since ignores (its row then waits for the poll
-- interval). SHARE waits for every open transaction that wrote to the table and holds off new ones until this commits,
-- so no such straddling transaction exists (while it waits, outbox writes and relays' marks wait behind it, as for
-- any DDL on the table). Run this migration in a transaction, as Schema.migrate and Flyway do.
-- The function body stays on one line: migrations are split into statements at a ';' at line end.
LOCK TABLE ${prefix}outbox IN SHARE MODE;
CREATE OR REPLACE FUNCTION ${prefix}outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${prefix}outbox', TG_TABLE_SCHEMA); RETURN NULL; END $$;
