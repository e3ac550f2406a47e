package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * What a started relay's empty poll after a batch that sent rows costs. The lock query finds nothing, and the relay
 * reads when the first pending row falls due (it polls then at the latest: {@link OutboxRelayWakeTest}). That read is
 * made in the empty poll's transaction, on pgjdbc in the lock query's round trip (one string of statements). Before,
 * it was a transaction of its own: a connection from the pool, the query and a commit (on MariaDB also auto-commit
 * switched off and on again): two round trips on pgjdbc, four on MariaDB Connector/J, for every batch that sent rows.
 */
class OutboxRelayEmptyPollTest {

    private static final String NEXT_DUE = "available_at > ?";
    private static final String LOCK = " AS pred ";

    @Test
    void theNextDueReadRidesInTheEmptyPollsRoundTripOnPostgres() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(5)) {
            List<List<String>> tx = startedWithOneRow(db);
            // the LISTEN connection, the batch, the gauges, the empty poll
            assertThat(tx)
                    .as("the relay's transactions, each as its statements")
                    .hasSize(4);
            List<String> emptyPoll = tx.get(3);
            assertThat(emptyPoll)
                    .as("the empty poll after the batch: one statement")
                    .hasSize(1);
            assertThat(emptyPoll.get(0)).contains(LOCK).contains(NEXT_DUE);
        }
    }

    @Test
    void theNextDueReadRidesInTheEmptyPollsTransactionOnMariaDb() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(5)) {
            List<List<String>> tx = startedWithOneRow(db);
            // the batch, the gauges, the empty poll (no LISTEN)
            assertThat(tx)
                    .as("the relay's transactions, each as its statements")
                    .hasSize(3);
            List<String> emptyPoll = tx.get(2);
            assertThat(emptyPoll).as("the empty poll after the batch").hasSize(3);
            assertThat(emptyPoll.get(1)).contains(LOCK);
            assertThat(emptyPoll.get(2)).contains(NEXT_DUE);
        }
    }

    /**
     * Starts a relay (poll interval an hour) on a database holding one row, waits until it sent it and waits for its
     * next wake-up, and returns the statements of each transaction it ran, in order.
     */
    private static List<List<String>> startedWithOneRow(TestDatabase db) throws Exception {
        OutboxRows.add(db.dataSource(), Clock.systemUTC(), "one", "k", "1");
        List<List<String>> transactions = new CopyOnWriteArrayList<>();
        List<String> sends = new CopyOnWriteArrayList<>();
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(recording(db.dataSource(), transactions))
                .name("emptypoll")
                .pollInterval(Duration.ofHours(1))
                .statsInterval(Duration.ofHours(1))
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    sends.add(m.eventId());
                    return Receipt.NONE;
                })
                .build()) {
            relay.start();
            await().atMost(Duration.ofSeconds(10)).until(() -> sends.size() == 1);
            // Sent, so the batch ran; waiting again, so its empty poll and the next-due read ran too.
            await().atMost(Duration.ofSeconds(10)).until(() -> waits("once-relay-emptypoll"));
            assertThat(sends).containsExactly("test:one#1");
            // The relay's builder took a connection to detect the dialect, and ran nothing on it.
            return transactions.stream().filter(t -> !t.isEmpty()).toList();
        }
    }

    // The relay's thread waits for its next wake-up (it is in RelayLoop's wait, not in a batch).
    private static boolean waits(String thread) {
        return Thread.getAllStackTraces().entrySet().stream()
                .filter(e -> e.getKey().getName().equals(thread))
                .anyMatch(e -> Arrays.stream(e.getValue())
                        .anyMatch(f -> f.getClassName().equals("dev.once.outbox.RelayLoop")
                                && f.getMethodName().equals("await")));
    }

    // Each connection taken is a transaction of the relay (or its LISTEN session): the statements prepared or run on
    // it.
    private static DataSource recording(DataSource target, List<List<String>> transactions) {
        return (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = CountingDataSource.invoke(method, target, args);
                    if (method.getName().equals("getConnection") && result instanceof Connection c) {
                        List<String> statements = new CopyOnWriteArrayList<>();
                        transactions.add(statements);
                        return recording(c, statements);
                    }
                    return result;
                });
    }

    private static Connection recording(Connection target, List<String> statements) {
        return (Connection) Proxy.newProxyInstance(
                Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    if (method.getName().equals("prepareStatement") && args[0] instanceof String sql) {
                        statements.add(sql);
                    }
                    Object result = CountingDataSource.invoke(method, target, args);
                    if (method.getName().equals("createStatement") && result instanceof Statement s) {
                        return recording(s, statements);
                    }
                    return result;
                });
    }

    private static Statement recording(Statement target, List<String> statements) {
        return (Statement) Proxy.newProxyInstance(
                Statement.class.getClassLoader(), new Class<?>[] {Statement.class}, (proxy, method, args) -> {
                    if (method.getName().startsWith("execute") && args != null && args[0] instanceof String sql) {
                        statements.add(sql);
                    }
                    return CountingDataSource.invoke(method, target, args);
                });
    }
}
