package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/** One outbox write per batch transaction on MariaDB (one JDBC batch). */
class OutboxBatchFlushMariaDbTest extends OutboxBatchFlushTest {

    @Override
    protected TestDatabase newDatabase() {
        return TestMariaDb.shared().freshDatabase(2);
    }

    @Override
    protected boolean postgres() {
        return false;
    }
}
