-- once schema, version 8, MariaDB: the fingerprint of each claimed payload (the first 8 bytes of its
-- SHA-256), written only under MismatchPolicy COUNT or FAIL_PERMANENT, so that an event id reused for
-- a different payload is seen rather than dropped as a duplicate. Nullable: claims made with the
-- policy OFF, and deliveries without payload, have none. InnoDB adds a trailing nullable column
-- instantly (10.3+), without rebuilding the table.
ALTER TABLE ${prefix}inbox ADD COLUMN IF NOT EXISTS payload_fingerprint bigint;
