package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/** Batches on MariaDB, claimed with one multi-row INSERT IGNORE … RETURNING per batch. */
class BatchMariaDbTest extends BatchTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }
}
