package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * One database, a schema per tenant, the same table prefix in each: every tenant's outbox trigger notifies the
 * same channel (a channel is the database's, not a schema's). A relay wakes only for its own schema's rows; a wake-up
 * for another tenant's would cost it an empty poll (a lock query and a commit), and with N tenants every insert would
 * wake N relays for one row.
 */
class OutboxRelaySchemasTest {

    @Test
    void aRelayIsNotWokenByAnotherSchemasOutboxInsertsOnTheSameChannel() throws Exception {
        try (TestDatabase mine = TestPostgres.shared().freshDatabase(4);
                TestDatabase other = TestPostgres.shared().freshDatabase(4);
                Connection listening = other.dataSource().getConnection()) {
            CountingDataSource counting = new CountingDataSource(mine.dataSource());
            List<Long> locksAtSend = new CopyOnWriteArrayList<>();
            try (Statement s = listening.createStatement()) {
                s.execute("LISTEN once_outbox");
            }
            try (OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(counting.dataSource())
                    .pollInterval(Duration.ofHours(1))
                    .meterRegistry(new SimpleMeterRegistry())
                    .publisher(m -> {
                        locksAtSend.add(lockQueries(counting));
                        return Receipt.NONE;
                    })
                    .build()) {
                relay.start();
                // its first poll (nothing to send), then it waits for a notification
                await().atMost(Duration.ofSeconds(20)).until(() -> lockQueries(counting) >= 1);
                for (int i = 0; i < 3; i++) {
                    OutboxRows.add(other.dataSource(), Clock.systemUTC(), "theirs-" + i, "k", "1");
                }
                awaitNotifications(listening, other.name(), 3);
                OutboxRows.add(mine.dataSource(), Clock.systemUTC(), "mine", "k", "1");
                await().atMost(Duration.ofSeconds(20)).until(() -> locksAtSend.size() == 1);
            }
            assertThat(locksAtSend)
                    .as("lock queries when its one row was sent: its first poll and the one its row's notification"
                            + " woke; none for the other schema's three commits on the same channel")
                    .containsExactly(2L);
        }
    }

    private static long lockQueries(CountingDataSource counting) {
        return counting.prepared().stream()
                .filter(sql -> sql.contains(" AS pred "))
                .count();
    }

    // Of the other schema only: every test JVM's outbox inserts into this database reach the channel too.
    private static void awaitNotifications(Connection listening, String schema, int n) throws Exception {
        org.postgresql.PGConnection pg = listening.unwrap(org.postgresql.PGConnection.class);
        int seen = 0;
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (seen < n && System.nanoTime() < deadline) {
            org.postgresql.PGNotification[] got = pg.getNotifications(100);
            for (org.postgresql.PGNotification g : got == null ? new org.postgresql.PGNotification[0] : got) {
                seen += g.getParameter().equals(schema) ? 1 : 0;
            }
        }
        assertThat(seen).as("notifications of the other schema's three commits").isEqualTo(n);
    }
}
