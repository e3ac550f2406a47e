package dev.once.spring;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/**
 * {@link SpringCallerTransactionPropertyTest} on MariaDB: the same chains, oracle and tries through
 * {@code DataSourceTransactionManager} (NESTED on MariaDB's savepoints) and {@code JpaTransactionManager}.
 */
class SpringCallerTransactionPropertyMariaDbTest extends SpringCallerTransactionPropertyTest {

    @Override
    TestDatabase freshDatabase() {
        return TestMariaDb.shared().freshDatabase(6);
    }

    @Override
    boolean mariaDb() {
        return true;
    }
}
