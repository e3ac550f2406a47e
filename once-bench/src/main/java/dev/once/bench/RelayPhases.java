package dev.once.bench;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * Where a backlog drain's batch time goes (issue 21 item 5: what the relay adds to what the broker
 * costs): from {@code publishAll} to the batch's last acknowledgement, during which the relay's rows
 * are in flight, and the rest, during which that relay has nothing in flight: the lock query, the
 * mark statement, the commit, taking a connection, and the relay's own code. Wraps the publisher
 * (only one that overrides {@code publishAll}: the sequential path stays as it is) and the data
 * source; a proxy call per JDBC call, nothing per message. Thread-safe.
 */
final class RelayPhases {

    private final AtomicLong batches = new AtomicLong();
    private final AtomicLong inBatches = new AtomicLong();
    private final AtomicLong inPublish = new AtomicLong();
    private final AtomicLong lock = new AtomicLong();
    private final AtomicLong mark = new AtomicLong();
    private final AtomicLong commit = new AtomicLong();
    private final AtomicLong connect = new AtomicLong();
    private final AtomicLong calls = new AtomicLong();
    private final AtomicLong trips = new AtomicLong();
    // This thread's times in the batch under way (publish, lock, mark, commit, connect) and its
    // publishAll calls (a batch's waves; each waits for the one before): added to
    // the totals when the batch handed rows, dropped for a batch that found none (a drain's last
    // lock query passes over every row still held and would count as a batch's).
    // And its round trips to the database (statement executions, commits and rollbacks: pgjdbc sends a
    // string of statements or a JDBC batch in one).
    private final ThreadLocal<long[]> current = ThreadLocal.withInitial(() -> new long[7]);

    /** Counts from now on: the warm-up batch is not counted. */
    void reset() {
        for (AtomicLong a : List.of(batches, inBatches, inPublish, lock, mark, commit, connect, calls, trips)) {
            a.set(0);
        }
    }

    /** A relay's {@code relayOnce} in this thread took {@code nanos} and handed {@code rows} rows to the publisher. */
    void batch(long nanos, int rows) {
        long[] c = current.get();
        if (rows > 0) {
            inBatches.addAndGet(nanos);
            inPublish.addAndGet(c[0]);
            lock.addAndGet(c[1]);
            mark.addAndGet(c[2]);
            commit.addAndGet(c[3]);
            connect.addAndGet(c[4]);
            calls.addAndGet(c[5]);
            trips.addAndGet(c[6]);
            batches.incrementAndGet();
        }
        Arrays.fill(c, 0);
    }

    Publisher publisher(Publisher p) {
        if (!overridesPublishAll(p)) {
            return p;
        }
        return new Publisher() {
            @Override
            public Receipt publish(OutboxMessage message) throws Exception {
                return p.publish(message);
            }

            // Waits for the stages here, which the relay does next anyway, to time the wait.
            @Override
            public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                long t0 = System.nanoTime();
                List<CompletionStage<Receipt>> stages = p.publishAll(messages);
                CompletableFuture.allOf(stages.stream()
                                .map(CompletionStage::toCompletableFuture)
                                .toArray(CompletableFuture[]::new))
                        .handle((x, e) -> null)
                        .join();
                current.get()[0] += System.nanoTime() - t0;
                current.get()[5]++;
                return stages;
            }
        };
    }

    DataSource dataSource(DataSource ds) {
        return proxy(DataSource.class, ds, (m, a, r, nanos) -> {
            if (m.equals("getConnection")) {
                current.get()[4] += nanos;
                return connection((Connection) r);
            }
            return r;
        });
    }

    private Connection connection(Connection c) {
        return proxy(Connection.class, c, (m, a, r, nanos) -> {
            if (m.equals("commit")) {
                current.get()[3] += nanos;
                current.get()[6]++;
            } else if (m.equals("rollback")) {
                current.get()[6]++;
            } else if (m.equals("prepareStatement")) {
                // The relay's two prepared statements of a batch: the lock query (FOR UPDATE; it
                // and the mark may both open with WITH), and the mark.
                int into = ((String) a[0]).contains("FOR UPDATE") ? 1 : 2;
                return proxy(PreparedStatement.class, (PreparedStatement) r, (sm, sa, sr, sn) -> {
                    if (sm.startsWith("execute")) {
                        current.get()[into] += sn;
                        current.get()[6]++;
                    }
                    return sr;
                });
            } else if (m.equals("createStatement")) {
                // The batch's first statement (Dialect.outboxBatchBegin), part of taking the batch.
                return proxy(Statement.class, (Statement) r, (sm, sa, sr, sn) -> {
                    if (sm.startsWith("execute")) {
                        current.get()[1] += sn;
                        current.get()[6]++;
                    }
                    return sr;
                });
            }
            return r;
        });
    }

    /** Per batch, in milliseconds: in flight, and the rest split; empty when no batch was timed. */
    String summary(long rows) {
        long n = batches.get();
        if (n == 0) {
            return "";
        }
        double rest = (inBatches.get() - inPublish.get()) / 1e6 / n;
        double db = (lock.get() + mark.get() + commit.get() + connect.get()) / 1e6 / n;
        return String.format(
                Locale.ROOT,
                "%d batches of %d rows on average in %.1f publishAll calls (waves); per batch %.1f ms from publishAll to the last acknowledgement,"
                        + " %.1f ms with nothing in flight: lock query %.1f, mark %.1f, commit %.1f, taking a"
                        + " connection %.1f, the relay's own code %.1f; %.2f round trips to the database per batch",
                n,
                rows / n,
                calls.get() / (double) n,
                inPublish.get() / 1e6 / n,
                rest,
                lock.get() / 1e6 / n,
                mark.get() / 1e6 / n,
                commit.get() / 1e6 / n,
                connect.get() / 1e6 / n,
                rest - db,
                trips.get() / (double) n);
    }

    @FunctionalInterface
    private interface After {
        Object returned(String method, Object[] args, Object result, long nanos);
    }

    private static <T> T proxy(Class<T> type, T target, After after) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, a) -> {
            long t0 = System.nanoTime();
            Object r;
            try {
                r = m.invoke(target, a);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
            return after.returned(m.getName(), a, r, System.nanoTime() - t0);
        }));
    }

    private static boolean overridesPublishAll(Publisher p) {
        try {
            return p.getClass().getMethod("publishAll", List.class).getDeclaringClass() != Publisher.class;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }
}
