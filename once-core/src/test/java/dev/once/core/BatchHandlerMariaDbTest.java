package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/** The batch handler on MariaDB: the same guarantees, the effect as one sorted JDBC batch. */
class BatchHandlerMariaDbTest extends BatchHandlerTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }

    @Override
    protected boolean postgres() {
        return false;
    }
}
