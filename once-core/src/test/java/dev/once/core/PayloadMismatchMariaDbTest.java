package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/**
 * Payload fingerprints on MariaDB, whose default REPEATABLE READ makes a plain read of the stored
 * fingerprint see the transaction's snapshot instead of the committed claim it conflicted with.
 */
class PayloadMismatchMariaDbTest extends PayloadMismatchTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }
}
