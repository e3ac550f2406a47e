package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.MismatchPolicy;
import dev.once.PayloadMismatchException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.listener.BatchListenerFailedException;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A batch {@link IdempotentListener} (a {@code List<ConsumerRecord>}) keeps the rules of the per-record
 * path: the mismatch policy for a reused event id, the check that the batch's claims are still the
 * transaction's, and the outcome listener. Called as the container calls it, without a broker.
 */
class BatchListenerTest {

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    static final List<String> outcomes = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() {
        db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @BeforeEach
    void reset() {
        jdbc.update("DELETE FROM ledger");
        jdbc.update("DELETE FROM once_inbox");
        outcomes.clear();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource ds) {
            return new JdbcTransactionManager(ds);
        }

        @Bean
        JdbcTemplate jdbcTemplate(DataSource ds) {
            return new JdbcTemplate(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JdbcTransactionManager tm) {
            return OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .onMismatch(MismatchPolicy.FAIL_PERMANENT)
                    .outcomeListener((d, o) -> outcomes.add(d.eventId() + "=" + o.tag()))
                    .build();
        }

        @Bean
        Ledger ledger(JdbcTemplate jdbc) {
            return new Ledger(jdbc);
        }
    }

    /** Batch listeners as an application writes them. */
    public static class Ledger {
        final JdbcTemplate jdbc;

        Ledger(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @IdempotentListener(consumer = "ledger")
        public void onBatch(List<ConsumerRecord<String, String>> records) {
            for (ConsumerRecord<String, String> r : records) {
                jdbc.update("INSERT INTO ledger VALUES (?, ?)", id(r), Long.parseLong(r.value()));
            }
        }

        /** Swallows a failed statement, as a "best effort" audit insert does; PostgreSQL aborts the transaction. */
        @IdempotentListener(consumer = "swallowing")
        public void onBatchSwallowing(List<ConsumerRecord<String, String>> records) {
            for (ConsumerRecord<String, String> r : records) {
                jdbc.update("INSERT INTO ledger VALUES (?, ?)", id(r), Long.parseLong(r.value()));
                try {
                    jdbc.update("INSERT INTO no_such_audit_table VALUES (?)", id(r));
                } catch (DataAccessException ignored) {
                    // best effort
                }
            }
        }
    }

    static String id(ConsumerRecord<String, String> r) {
        return new String(r.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8);
    }

    static ConsumerRecord<String, String> record(long offset, String eventId, String value) {
        ConsumerRecord<String, String> r = new ConsumerRecord<>("payments", 0, offset, "k", value);
        r.headers().add("once-event-id", eventId.getBytes(StandardCharsets.UTF_8));
        return r;
    }

    static long ledger(String eventId) {
        return jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    @Test
    void aReusedEventIdInABatchFailsPermanentlyAsInTheRecordPath() {
        Ledger listener = context.getBean(Ledger.class);
        listener.onBatch(List.of(record(0, "e-1", "20")));
        outcomes.clear();

        assertThatThrownBy(() -> listener.onBatch(List.of(record(1, "e-2", "30"), record(2, "e-1", "999"))))
                .as("'e-1' was applied with another payload: under FAIL_PERMANENT it goes to the error handler")
                .isInstanceOf(BatchListenerFailedException.class)
                .hasCauseInstanceOf(PayloadMismatchException.class)
                .satisfies(e -> assertThat(((BatchListenerFailedException) e).getIndex())
                        .isEqualTo(1));
        assertThat(ledger("e-2")).as("the record before it is committed").isEqualTo(1);
        assertThat(jdbc.queryForObject("SELECT sum(amount) FROM ledger WHERE event_id = 'e-1'", Long.class))
                .as("the reused id applies nothing")
                .isEqualTo(20);
        assertThat(outcomes).contains("e-2=applied", "e-1=failed_permanent");
    }

    /**
     * A record with no event id fails a batch the caller called in its own transaction: the records before it are
     * applied one by one in that transaction, so the error handler must not read that they are committed (the
     * caller's rollback takes them back, as here). Outside a transaction they are, and the message says so.
     */
    @Test
    void aBatchFailingInTheCallersTransactionDoesNotSayTheRecordsBeforeItAreCommitted() {
        Ledger listener = context.getBean(Ledger.class);
        ConsumerRecord<String, String> noEventId = new ConsumerRecord<>("payments", 0, 1, "k", "30");
        TransactionTemplate caller = new TransactionTemplate(context.getBean(JdbcTransactionManager.class));

        assertThatThrownBy(() ->
                        caller.executeWithoutResult(s -> listener.onBatch(List.of(record(0, "c-1", "20"), noEventId))))
                .isInstanceOf(BatchListenerFailedException.class)
                .hasMessageContaining("record 1 of 2 failed for consumer 'ledger'; the 1 before it are applied in the"
                        + " transaction the call joined, and commit or roll back with it")
                .hasMessageNotContaining("committed");
        assertThat(ledger("c-1"))
                .as("rolled back with the caller's transaction")
                .isZero();

        assertThatThrownBy(() -> listener.onBatch(List.of(record(0, "c-1", "20"), noEventId)))
                .isInstanceOf(BatchListenerFailedException.class)
                .hasMessageContaining("record 1 of 2 failed for consumer 'ledger'; the 1 before it are committed");
        assertThat(ledger("c-1")).as("committed in a transaction of its own").isEqualTo(1);
    }

    @Test
    void aBatchWhoseBodySwallowedAFailedStatementIsNotAcknowledged() {
        Ledger listener = context.getBean(Ledger.class);
        assertThatThrownBy(() -> listener.onBatchSwallowing(List.of(record(0, "s-1", "20"), record(1, "s-2", "20"))))
                .as("the database aborted the transaction: nothing of the batch stands, so it must not return")
                .isInstanceOf(BatchListenerFailedException.class);
        assertThat(ledger("s-1")).isZero();
        assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox", Long.class))
                .isZero();
        assertThat(outcomes).doesNotContain("s-1=applied", "s-2=applied");
    }

    @Test
    void aBatchIsReportedToTheOutcomeListener() {
        Ledger listener = context.getBean(Ledger.class);
        listener.onBatch(List.of(record(0, "r-1", "20"), record(1, "r-2", "20"), record(2, "r-1", "20")));
        assertThat(outcomes).containsExactly("r-1=applied", "r-2=applied", "r-1=duplicate");
        listener.onBatch(List.of(record(3, "r-2", "20")));
        assertThat(outcomes).endsWith("r-2=duplicate");
        assertThat(ledger("r-1")).isEqualTo(1);
    }
}
