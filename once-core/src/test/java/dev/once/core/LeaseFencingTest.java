package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;

/** {@link LeaseScenarios} on PostgreSQL. */
class LeaseFencingTest extends LeaseScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(RACERS + 2);
    }

    @Override
    String ledgerTable() {
        return "CREATE TABLE ledger_write (id bigserial PRIMARY KEY, round int NOT NULL, writer text NOT NULL,"
                + " token bigint NOT NULL)";
    }
}
