package dev.once.testkit;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/** The same contract on MariaDB: the guarantee does not depend on PostgreSQL. */
class LedgerContractMariaDbTest extends LedgerContractTest {

    @Override
    protected TestDatabase newDatabase(int poolSize) {
        return TestMariaDb.shared().freshDatabase(poolSize);
    }
}
