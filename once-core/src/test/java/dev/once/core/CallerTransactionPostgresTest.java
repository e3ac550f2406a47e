package dev.once.core;

import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testkit.TestDatabase;
import dev.once.testkit.TestPostgres;

/** {@link CallerTransactionScenarios} on PostgreSQL. */
class CallerTransactionPostgresTest extends CallerTransactionScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(6);
    }

    @Override
    Dialect dialect() {
        return Dialects.POSTGRESQL;
    }
}
