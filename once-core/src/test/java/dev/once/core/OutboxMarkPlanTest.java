package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.internal.OutboxRepository;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A relay's connection lives long and the driver prepares its statements on the server, where
 * PostgreSQL caches a generic plan after five executions and keeps it until the table's statistics
 * change. A relay started on a new, small outbox table planned its mark (one statement for a whole
 * batch, over arrays) while the table was a few pages: a hash join over a sequential scan of the
 * table, then kept it while the table grew to every row ever sent (until autovacuum's first
 * ANALYZE). At an offered load of 5,000 messages/s that read the whole table for each batch of a
 * dozen rows: 375 µs of server time per message against 15 in a drain (RelayProbe).
 */
class OutboxMarkPlanTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase(2);
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    @Test
    void theMarkFindsItsRowsByTheirIdsAfterTheTableGrewPastWhatItsConnectionFirstPlanned() throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            OutboxRepository repository = new OutboxRepository(Dialects.detect(c), TablePrefix.DEFAULT);
            // A new outbox: batches of one row while the table is a page, enough for the driver to
            // prepare the statements on the server and for the server to settle on generic plans.
            for (int i = 0; i < 20; i++) {
                insert(
                        c,
                        "INSERT INTO once_outbox (event_id, destination, msg_key, payload, headers, idempotency_key,"
                                + " available_at, created_at) VALUES ('small-" + i + "', 'd', 'k', '\\x31', '', 'small-"
                                + i
                                + "', now(), now())");
                markSent(c, repository);
                c.commit();
            }
            // The table grows by rows sent meanwhile (no ANALYZE: autovacuum has not come by yet).
            insert(
                    c,
                    "INSERT INTO once_outbox (event_id, destination, msg_key, payload, headers, idempotency_key,"
                            + " available_at, created_at, status, sent_at) SELECT 'sent-' || g, 'd', 'k' || (g % 100),"
                            + " '\\x31', '', 'sent-' || g, now(), now(), 'sent', now() FROM generate_series(1, 30000) g");
            insert(
                    c,
                    "INSERT INTO once_outbox (event_id, destination, msg_key, payload, headers, idempotency_key,"
                            + " available_at, created_at) VALUES ('grown', 'd', 'k', '\\x31', '', 'grown', now(), now())");
            c.commit();

            long before = sequentialScans(c);
            assertThat(markSent(c, repository))
                    .as("the new row, locked and marked")
                    .isEqualTo(1);
            long scans = sequentialScans(c) - before;
            c.commit();

            assertThat(scans)
                    .as("sequential scans of the outbox table by the lock query and the mark of one row, with 30,000"
                            + " sent rows in the table: the rows are found by their ids, however small the table was"
                            + " when the connection first planned the statements")
                    .isZero();
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent' AND attempts = 1"))
                    .as("every row the relay locked marked sent once")
                    .isEqualTo(21);
        }
    }

    private static int markSent(Connection c, OutboxRepository repository) throws SQLException {
        Instant now = Instant.now().plusSeconds(1);
        List<OutboxMessage> rows = repository.lockBatch(c, now, "%", 100);
        repository.mark(
                c,
                rows.stream()
                        .map(m -> new OutboxRepository.Sent(m.id(), now, Receipt.NONE))
                        .toList(),
                false);
        return rows.size();
    }

    private static void insert(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    // This transaction's scans, counted by the server before they are reported to the statistics.
    private static long sequentialScans(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs =
                        s.executeQuery("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'once_outbox'")) {
            return rs.next() ? rs.getLong(1) : 0;
        }
    }
}
