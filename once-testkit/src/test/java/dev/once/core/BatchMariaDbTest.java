package dev.once.core;

import dev.once.testkit.TestDatabase;
import dev.once.testkit.TestMariaDb;

/** Batches on MariaDB, where ids are claimed one statement each inside the one transaction. */
class BatchMariaDbTest extends BatchTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }
}
