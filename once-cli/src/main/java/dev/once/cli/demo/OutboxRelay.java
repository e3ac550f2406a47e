package dev.once.cli.demo;

import javax.sql.DataSource;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Sends the once lane's outbox rows to the payment provider with their idempotency key, and marks
 * them sent in the same transaction that locked them ({@code FOR UPDATE SKIP LOCKED}).
 *
 * <p>Interim: a minimal relay for the demo until the outbox work's relay and HTTP publisher are
 * on main; it should then be replaced by them. It can be made to crash once after the provider's
 * answer and before the mark ({@link #crashAfterSend}), which re-sends the same key.
 */
final class OutboxRelay implements AutoCloseable {

    static final Duration POLL = Duration.ofMillis(100);

    final AtomicInteger resends = new AtomicInteger();
    private final DataSource dataSource;
    private final HttpClient http;
    private final Set<String> crashKeys = ConcurrentHashMap.newKeySet();
    private final Thread thread;
    private volatile boolean running = true;

    OutboxRelay(DataSource dataSource, HttpClient http) {
        this.dataSource = dataSource;
        this.http = http;
        this.thread = new Thread(this::loop, "once-demo-relay");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    /** The relay dies once between sending this key and marking it sent. */
    void crashAfterSend(String idempotencyKey) {
        crashKeys.add(idempotencyKey);
    }

    private void loop() {
        while (running) {
            try {
                if (relayOnce() == 0) {
                    Thread.sleep(POLL.toMillis());   // polling interval of an idle relay
                }
            } catch (InterruptedException e) {
                return;
            } catch (Exception e) {
                // The database or provider is away: the rows stay pending and are tried on the next round.
                try {
                    Thread.sleep(POLL.toMillis());
                } catch (InterruptedException ie) {
                    return;
                }
            }
        }
    }

    private record Row(long id, String destination, byte[] payload, String key) {
    }

    private int relayOnce() throws SQLException, InterruptedException {
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try {
                List<Row> rows = new ArrayList<>();
                try (PreparedStatement ps = c.prepareStatement(DemoSql.OUTBOX_CLAIM)) {
                    ps.setTimestamp(1, Timestamp.from(Instant.now()));   // 1 now
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            rows.add(new Row(rs.getLong(1), rs.getString(2), rs.getBytes(3), rs.getString(4)));
                        }
                    }
                }
                for (Row row : rows) {
                    String error = send(row);
                    if (error == null && crashKeys.remove(row.key())) {
                        // Died after the provider charged and before the mark: the row stays pending.
                        c.rollback();
                        resends.incrementAndGet();
                        return rows.size();
                    }
                    try (PreparedStatement ps = c.prepareStatement(error == null ? DemoSql.OUTBOX_SENT : DemoSql.OUTBOX_RETRY)) {
                        if (error == null) {
                            ps.setTimestamp(1, Timestamp.from(Instant.now()));   // 1 sent_at
                            ps.setLong(2, row.id());                             // 2 id
                        } else {
                            ps.setString(1, error);                                           // 1 last error
                            ps.setTimestamp(2, Timestamp.from(Instant.now().plusSeconds(1))); // 2 next attempt
                            ps.setLong(3, row.id());                                          // 3 id
                        }
                        ps.executeUpdate();
                    }
                }
                c.commit();
                return rows.size();
            } catch (SQLException | InterruptedException | RuntimeException e) {
                c.rollback();
                throw e;
            }
        }
    }

    private String send(Row row) throws InterruptedException {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(row.destination()))
                    .timeout(Duration.ofSeconds(5))
                    .header("Content-Type", "application/json")
                    .header(PaymentProvider.IDEMPOTENCY_KEY, row.key())
                    .header(PaymentProvider.CALLER, OnceLane.NAME)
                    .POST(HttpRequest.BodyPublishers.ofByteArray(row.payload())).build(), HttpResponse.BodyHandlers.ofString());
            return r.statusCode() / 100 == 2 ? null : "provider answered " + r.statusCode();
        } catch (java.io.IOException e) {
            return "provider unreachable: " + e.getMessage();
        }
    }

    @Override
    public void close() throws InterruptedException {
        running = false;
        thread.interrupt();
        thread.join(5_000);
    }
}
