package dev.once.bench;

import dev.once.ClaimTiming;
import dev.once.outbox.OutboxMessage;
import dev.once.spring.IdempotentListener;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.dao.DuplicateKeyException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.listener.BatchInterceptor;
import org.springframework.kafka.listener.RecordInterceptor;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.interceptor.TransactionAspectSupport;

/**
 * The Spring Boot application the {@code spring} suite runs: the listeners a team writes, each a
 * {@code @KafkaListener} that credits one of the ledger's accounts per event (the core and Kafka
 * suites' effect), on Boot's auto-configured {@code DataSourceTransactionManager}, {@code JdbcTemplate}
 * and Kafka container factory, and once's starter. Everything is {@code @SpringBootApplication} but the
 * component scan: the listeners are imported by name so nothing else in the package becomes a bean.
 * Every listener starts stopped ({@code autoStartup = "false"}): the suite runs one at a time.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
@Import({
    SpringApp.OnceListeners.class,
    SpringApp.ProcessedEventsListener.class,
    SpringApp.PlainProcessedEventsListener.class,
    SpringApp.PlainListener.class,
    SpringApp.Meter.class
})
public class SpringApp {

    /** Listener ids, as the suite starts them and names the rows. */
    static final String ONCE_RECORD = "once-record";

    static final String ONCE_RECORD_AT_COMMIT = "once-record-at-commit";

    static final String ONCE_BATCH = "once-batch";
    static final String ONCE_BATCH_JDBC = "once-batch-jdbc";
    static final String ONCE_BATCH_SET = "once-batch-set";
    static final String PROCESSED_EVENTS = "processed-events";
    static final String PROCESSED_EVENTS_PLAIN = "processed-events-plain";
    static final String NO_DEDUPE = "no-dedupe";

    /**
     * A poll per call, offsets committed after the call returned (the only ack mode once allows a batch); the
     * {@link Meter} counts its polls, as Boot's factory of the per-record listeners takes it as their record
     * interceptor.
     */
    @Bean
    static ConcurrentKafkaListenerContainerFactory<Object, Object> batchFactory(
            ConsumerFactory<Object, Object> consumers, Meter meter) {
        var factory = new ConcurrentKafkaListenerContainerFactory<Object, Object>();
        factory.setConsumerFactory(consumers);
        factory.setBatchListener(true);
        factory.setBatchInterceptor(meter);
        return factory;
    }

    /**
     * Deliveries the listener container has handed to a listener and seen return, counted by the container's
     * own interceptors ({@code RecordInterceptor.success}, {@code BatchInterceptor.success}: after the listener
     * call returned, so after the transaction the listener or its {@code @Transactional} proxy began has
     * committed) and timed from the first delivery handed to a listener to the last one returned; with the CPU
     * time and bytes the container's thread spent meanwhile (poll, listener adapter, interceptor, JDBC driver,
     * body). Nothing of it runs in a listener's body or transaction: a body that registered a Spring
     * synchronization to count its commit (this bench's until 2026-12-04) made once's listener take the path a
     * body with synchronizations of its own takes, and most bodies register none. Whether every row applied
     * each event once is read from the database after the row ({@code SpringSuite}). One listener runs at a
     * time, on one thread.
     */
    public static class Meter implements RecordInterceptor<Object, Object>, BatchInterceptor<Object, Object> {
        private static final com.sun.management.ThreadMXBean THREADS =
                (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

        private final AtomicLong handled = new AtomicLong();
        private volatile long first;
        private volatile long last;
        private volatile long firstCpu;
        private volatile long lastCpu;
        private volatile long firstAllocated;
        private volatile long lastAllocated;

        void reset() {
            handled.set(0);
            first = 0;
            last = 0;
        }

        /** Deliveries whose listener call returned since {@link #reset}. */
        long handled() {
            return handled.get();
        }

        /** Seconds from the first delivery handed to a listener to the last one returned. */
        double seconds() {
            return (last - first) / 1e9;
        }

        /** CPU nanoseconds of the listener's thread over the same span. */
        long cpuNanos() {
            return lastCpu - firstCpu;
        }

        /**
         * Bytes the listener's thread allocated over the same span: unlike its CPU time, the same for the
         * same code whatever else the machine runs, so rows can be compared on a loaded machine.
         */
        long allocatedBytes() {
            return lastAllocated - firstAllocated;
        }

        @Override
        public ConsumerRecord<Object, Object> intercept(
                ConsumerRecord<Object, Object> record, Consumer<Object, Object> consumer) {
            entered();
            return record;
        }

        @Override
        public void success(ConsumerRecord<Object, Object> record, Consumer<Object, Object> consumer) {
            returned(1);
        }

        @Override
        public ConsumerRecords<Object, Object> intercept(
                ConsumerRecords<Object, Object> records, Consumer<Object, Object> consumer) {
            entered();
            return records;
        }

        @Override
        public void success(ConsumerRecords<Object, Object> records, Consumer<Object, Object> consumer) {
            returned(records.count());
        }

        private void entered() {
            if (first == 0) {
                firstCpu = THREADS.getCurrentThreadCpuTime();
                firstAllocated = THREADS.getCurrentThreadAllocatedBytes();
                first = System.nanoTime();
            }
        }

        private void returned(int n) {
            lastCpu = THREADS.getCurrentThreadCpuTime();
            lastAllocated = THREADS.getCurrentThreadAllocatedBytes();
            last = System.nanoTime();
            handled.addAndGet(n);
        }
    }

    static String eventId(ConsumerRecord<?, ?> record) {
        return new String(
                record.headers().lastHeader(OutboxMessage.EVENT_ID_HEADER).value(), StandardCharsets.UTF_8);
    }

    static long account(String eventId) {
        return Math.floorMod(eventId.hashCode(), BenchPostgres.ACCOUNTS);
    }

    /** With once: the event id claimed in the listener's transaction, the body skipped for a duplicate. */
    public static class OnceListeners {
        private final JdbcTemplate jdbc;

        public OnceListeners(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** a) One record per call and per transaction. */
        @KafkaListener(id = ONCE_RECORD, topics = "${bench.records-topic}", autoStartup = "false")
        @IdempotentListener(consumer = "spring-record")
        public void on(ConsumerRecord<String, String> record) {
            jdbc.update(Ledger.CREDIT, 1L, account(eventId(record)));
        }

        /** a') As a), the body first and the claim in the COMMIT's round trip: a copy's credit rolls back. */
        @KafkaListener(id = ONCE_RECORD_AT_COMMIT, topics = "${bench.records-topic}", autoStartup = "false")
        @IdempotentListener(consumer = "spring-record-at-commit", claimTiming = ClaimTiming.AT_COMMIT)
        public void onAtCommit(ConsumerRecord<String, String> record) {
            jdbc.update(Ledger.CREDIT, 1L, account(eventId(record)));
        }

        /** b) A poll per call: one claim statement for the poll, then the per-record update for each fresh record. */
        @KafkaListener(
                id = ONCE_BATCH,
                topics = "${bench.batches-topic}",
                containerFactory = "batchFactory",
                autoStartup = "false")
        @IdempotentListener(consumer = "spring-batch")
        public void onBatch(List<ConsumerRecord<String, String>> fresh) {
            for (ConsumerRecord<String, String> record : fresh) {
                jdbc.update(Ledger.CREDIT, 1L, account(eventId(record)));
            }
        }

        /**
         * b') As b), the per-record updates sent as one JDBC batch ({@code batchUpdate}: pgjdbc pipelines the
         * statements in one round trip), the way a batch listener is written for throughput; b) pays a round
         * trip of its own body per record, which bounds it whatever the dedupe costs.
         */
        @KafkaListener(
                id = ONCE_BATCH_JDBC,
                topics = "${bench.batches-topic}",
                containerFactory = "batchFactory",
                autoStartup = "false")
        @IdempotentListener(consumer = "spring-batch-jdbc")
        public void onBatchJdbc(List<ConsumerRecord<String, String>> fresh) {
            List<Object[]> credits = new ArrayList<>(fresh.size());
            for (ConsumerRecord<String, String> record : fresh) {
                credits.add(new Object[] {1L, account(eventId(record))});
            }
            jdbc.batchUpdate(Ledger.CREDIT, credits);
        }

        /** c) A poll per call, the fresh records' credits summed per account and applied in one statement. */
        @KafkaListener(
                id = ONCE_BATCH_SET,
                topics = "${bench.batches-topic}",
                containerFactory = "batchFactory",
                autoStartup = "false")
        @IdempotentListener(consumer = "spring-batch-set")
        public void onBatchSet(List<ConsumerRecord<String, String>> fresh) {
            TreeMap<Long, Long> perAccount = new TreeMap<>(); // sorted: one lock order
            for (ConsumerRecord<String, String> record : fresh) {
                perAccount.merge(account(eventId(record)), 1L, Long::sum);
            }
            jdbc.update(c -> {
                PreparedStatement ps = c.prepareStatement(Ledger.CREDIT_ALL);
                ps.setArray(1, c.createArrayOf("bigint", perAccount.keySet().toArray()));
                ps.setArray(2, c.createArrayOf("bigint", perAccount.values().toArray()));
                return ps;
            });
        }
    }

    /**
     * d) Without once, the way a Spring team writes it: a {@code processed_events} row inserted in the
     * listener's {@code @Transactional} method, the effect skipped when the insert found the id there.
     * {@code ON CONFLICT DO NOTHING}: one statement, no exception to handle, and the form most teams write.
     */
    public static class ProcessedEventsListener {
        private final JdbcTemplate jdbc;

        public ProcessedEventsListener(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @KafkaListener(id = PROCESSED_EVENTS, topics = "${bench.records-topic}", autoStartup = "false")
        @Transactional
        public void on(ConsumerRecord<String, String> record) {
            String id = eventId(record);
            if (jdbc.update("INSERT INTO processed_events (event_id) VALUES (?) ON CONFLICT DO NOTHING", id) == 0) {
                return; // seen before
            }
            jdbc.update(Ledger.CREDIT, 1L, account(id));
        }
    }

    /**
     * d') As d), the {@code processed_events} row a plain insert (into a table of its own shape): cheaper on
     * the server than {@code ON CONFLICT} (no speculative insertion), and what once itself sends in a
     * transaction of its own; a copy's insert fails on the key and the listener marks the transaction
     * rollback-only and returns, so the copy is acknowledged. The best hand-written form.
     */
    public static class PlainProcessedEventsListener {
        private final JdbcTemplate jdbc;

        public PlainProcessedEventsListener(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @KafkaListener(id = PROCESSED_EVENTS_PLAIN, topics = "${bench.records-topic}", autoStartup = "false")
        @Transactional
        public void on(ConsumerRecord<String, String> record) {
            String id = eventId(record);
            try {
                jdbc.update("INSERT INTO processed_events_plain (event_id) VALUES (?)", id);
            } catch (DuplicateKeyException seenBefore) {
                TransactionAspectSupport.currentTransactionStatus().setRollbackOnly();
                return;
            }
            jdbc.update(Ledger.CREDIT, 1L, account(id));
        }
    }

    /** e) No dedupe: the update in auto-commit, every delivery applied, copies included. */
    public static class PlainListener {
        private final JdbcTemplate jdbc;

        public PlainListener(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @KafkaListener(id = NO_DEDUPE, topics = "${bench.records-topic}", autoStartup = "false")
        public void on(ConsumerRecord<String, String> record) {
            jdbc.update(Ledger.CREDIT, 1L, account(eventId(record)));
        }
    }
}
