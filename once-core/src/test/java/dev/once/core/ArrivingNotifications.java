package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * A data source whose {@code LISTEN} connection a test can see notifications arrive on. PostgreSQL sends a
 * notification to each listening session when that session's backend gets to it: a test's own {@code LISTEN}
 * connection having it says nothing about when the relay's has it (a starved backend sends it later, after the
 * relay's next poll, and the relay wakes once more for rows that poll took). Here the relay's own connection is
 * read: {@link #awaitArrived} takes what reaches it into a buffer that the connection's {@code getNotifications}
 * hands out first, as the driver hands out what it has received, so that the test waits for exactly what the relay
 * will find. The notifications and the connection are real; only their hand-over goes through the buffer.
 */
final class ArrivingNotifications {

    private final DataSource dataSource;
    private final Object lock = new Object();
    private final CountDownLatch listened = new CountDownLatch(1);
    // read from the LISTEN connection by awaitArrived and not yet taken by its user
    private final List<PGNotification> buffered = new ArrayList<>();
    private volatile PGConnection listening;
    // every notification read from the LISTEN connection, by its user or by awaitArrived
    private int arrived;

    ArrivingNotifications(DataSource target) {
        this.dataSource = (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = CountingDataSource.invoke(method, target, args);
                    return method.getName().equals("getConnection") && method.getReturnType() == Connection.class
                            ? connection((Connection) result)
                            : result;
                });
    }

    DataSource dataSource() {
        return dataSource;
    }

    /** Waits until a connection of this data source has run {@code LISTEN}: every commit after it notifies it. */
    void awaitListening() throws InterruptedException {
        assertThat(listened.await(20, TimeUnit.SECONDS))
                .as("a LISTEN on a connection of the data source")
                .isTrue();
    }

    /**
     * Waits until {@code n} notifications in all have reached the {@code LISTEN} connection, reading them off it
     * into the buffer its user's next {@code getNotifications} returns. Call it while the connection's user leaves
     * it alone (the relay in a batch).
     */
    void awaitArrived(int n) throws SQLException {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        synchronized (lock) {
            while (arrived < n && System.nanoTime() < deadline) {
                keep(listening.getNotifications(100));
            }
            assertThat(arrived)
                    .as("notifications that reached the LISTEN connection")
                    .isEqualTo(n);
        }
    }

    private Connection connection(Connection target) {
        return (Connection) Proxy.newProxyInstance(
                Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    Object result = CountingDataSource.invoke(method, target, args);
                    if (method.getName().equals("unwrap") && args[0] == PGConnection.class) {
                        return buffering((PGConnection) result);
                    }
                    if (method.getName().equals("createStatement") && args == null) {
                        return statement((Statement) result, target);
                    }
                    return result;
                });
    }

    private Statement statement(Statement target, Connection connection) {
        return (Statement) Proxy.newProxyInstance(
                Statement.class.getClassLoader(), new Class<?>[] {Statement.class}, (proxy, method, args) -> {
                    Object result = CountingDataSource.invoke(method, target, args);
                    if (method.getName().equals("execute")
                            && args[0] instanceof String sql
                            && sql.toUpperCase(Locale.ROOT).startsWith("LISTEN ")) {
                        listening = connection.unwrap(PGConnection.class);
                        listened.countDown();
                    }
                    return result;
                });
    }

    /** {@code target}, its notifications handed out after the buffered ones. */
    private PGConnection buffering(PGConnection target) {
        return (PGConnection) Proxy.newProxyInstance(
                PGConnection.class.getClassLoader(), new Class<?>[] {PGConnection.class}, (proxy, method, args) -> {
                    if (!method.getName().equals("getNotifications")) {
                        return CountingDataSource.invoke(method, target, args);
                    }
                    synchronized (lock) {
                        // with notifications received, the driver returns them at once, with whatever else has
                        // reached the socket, instead of waiting: so does the buffer
                        keep(
                                buffered.isEmpty()
                                        ? (PGNotification[]) CountingDataSource.invoke(method, target, args)
                                        : target.getNotifications());
                        PGNotification[] out = buffered.isEmpty() ? null : buffered.toArray(new PGNotification[0]);
                        buffered.clear();
                        return out;
                    }
                });
    }

    private void keep(PGNotification[] got) {
        if (got != null) {
            buffered.addAll(List.of(got));
            arrived += got.length;
        }
    }
}
