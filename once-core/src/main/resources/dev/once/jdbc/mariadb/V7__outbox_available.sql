-- once schema, version 7, MariaDB: rows waiting for a retry cost a relay's poll nothing.

-- The relay's lock query reads pending rows in (available_at, id) order and stops at the first one
-- available later than now, so rows in backoff (a destination that is down) are never read; with
-- only (status, id) every poll stepped over all of them, oldest first.
ALTER TABLE ${prefix}outbox ADD KEY IF NOT EXISTS ${prefix}outbox_available (status, available_at, id);
