package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;

/** {@link OutboxRelayExclusiveScenarios} on MariaDB. */
class OutboxRelayExclusiveMariaDbTest extends OutboxRelayExclusiveScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestMariaDb.shared().freshDatabase(20);
    }
}
