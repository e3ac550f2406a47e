package dev.once.core;

import dev.once.testkit.TestDatabase;
import dev.once.testkit.TestMariaDb;

/** Batches on MariaDB, claimed with one multi-row INSERT IGNORE … RETURNING per batch. */
class BatchMariaDbTest extends BatchTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }
}
