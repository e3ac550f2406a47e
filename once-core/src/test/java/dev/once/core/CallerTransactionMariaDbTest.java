package dev.once.core;

import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testkit.TestDatabase;
import dev.once.testkit.TestMariaDb;

/** {@link CallerTransactionScenarios} on MariaDB. */
class CallerTransactionMariaDbTest extends CallerTransactionScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestMariaDb.shared().freshDatabase(6);
    }

    @Override
    Dialect dialect() {
        return Dialects.MARIADB;
    }
}
