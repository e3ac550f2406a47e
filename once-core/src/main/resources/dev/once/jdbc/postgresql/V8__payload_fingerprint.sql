-- once schema, version 8, PostgreSQL: the fingerprint of each claimed payload (the first 8 bytes of
-- its SHA-256), written only under MismatchPolicy COUNT or FAIL_PERMANENT, so that an event id reused
-- for a different payload is seen rather than dropped as a duplicate. Nullable: claims made with
-- the policy OFF, and deliveries without payload, have none. Adding a nullable column without a
-- default changes only the catalogue; no row is rewritten.
ALTER TABLE ${prefix}inbox ADD COLUMN payload_fingerprint bigint;
