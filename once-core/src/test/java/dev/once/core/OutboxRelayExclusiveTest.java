package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;

/** {@link OutboxRelayExclusiveScenarios} on PostgreSQL. */
class OutboxRelayExclusiveTest extends OutboxRelayExclusiveScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(20);
    }
}
