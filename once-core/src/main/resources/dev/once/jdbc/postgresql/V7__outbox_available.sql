-- once schema, version 7, PostgreSQL: rows waiting for a retry cost a relay's poll nothing.

-- The relay's lock query reads pending rows in (available_at, id) order and stops at the first one
-- available later than now, so rows in backoff (a destination that is down) are never read; with
-- only the (id) index every poll stepped over all of them, oldest first. The (id) index stays: it
-- finds the oldest pending row for the lag gauge. On a large existing outbox, create this index
-- CONCURRENTLY by hand before migrating (this statement blocks writes to the table while it runs)
-- and the statement below finds it there.
CREATE INDEX IF NOT EXISTS ${prefix}outbox_available ON ${prefix}outbox (available_at, id) WHERE status = 'pending';
