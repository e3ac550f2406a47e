package dev.once.spring;

import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * {@link SpringCallerTransactionPropertyTest} on MariaDB: the same chains, oracle and tries through
 * {@code DataSourceTransactionManager} (NESTED on MariaDB's savepoints) and {@code JpaTransactionManager}.
 */
@AddLifecycleHook(SkipWithoutMariaDb.class)
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
