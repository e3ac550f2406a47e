-- once schema, version 6, MariaDB: keys compare byte for byte. utf8mb4_bin is a PAD SPACE collation,
-- so 'evt-1' and 'evt-1 ' were one key: a second event whose id differs by trailing spaces was taken
-- for a duplicate and lost (found by HostileInputTest). utf8mb4_nopad_bin compares exactly.
-- Each statement rebuilds its table: on a large inbox, prune it first or run this in a quiet hour.
ALTER TABLE ${prefix}inbox CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
ALTER TABLE ${prefix}outbox CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
ALTER TABLE ${prefix}idempotency_key CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
ALTER TABLE ${prefix}lease CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
ALTER TABLE ${prefix}fence CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
ALTER TABLE ${prefix}kafka_offsets CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin;
