package dev.once.kafka;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The business effect used across Kafka tests: credit one account by the payload's amount, and
 * log every application in {@code applied} with the partition and offset of the record that caused
 * it. {@code applied} has no unique constraint on the event id, on purpose: a second application
 * shows up as a second row instead of being stopped by the table itself.
 */
final class KafkaLedger {

    static final String[] SCHEMA = {
        "CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL)",
        "INSERT INTO account VALUES (1, 0)",
        "CREATE TABLE applied (seq bigserial PRIMARY KEY, event_id text NOT NULL, part int NOT NULL,"
                + " off bigint NOT NULL, amount bigint NOT NULL)"
    };

    /** One event to publish: its id, amount and partition. */
    record Event(String id, long amount, int partition) {}

    private KafkaLedger() {}

    static final Handler CREDIT = (d, tx) -> {
        long amount = Long.parseLong(d.payloadText());
        int at = d.source().lastIndexOf('@');
        int slash = d.source().lastIndexOf('/');
        try (PreparedStatement ins = tx.connection()
                        .prepareStatement("INSERT INTO applied (event_id, part, off, amount) VALUES (?, ?, ?, ?)");
                PreparedStatement upd =
                        tx.connection().prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ins.setString(1, d.eventId());
            ins.setInt(2, Integer.parseInt(d.source().substring(slash + 1, at)));
            ins.setLong(3, Long.parseLong(d.source().substring(at + 1)));
            ins.setLong(4, amount);
            ins.executeUpdate();
            upd.setLong(1, amount);
            upd.executeUpdate();
        }
    };

    /**
     * {@link #CREDIT} set-wise: the log rows as one JDBC batch, the balance as one update of the
     * batch's sum. Records in {@code applied} in the order of the list.
     */
    static final BatchHandler BATCH_CREDIT = (claimed, tx) -> {
        long sum = 0;
        try (PreparedStatement ins = tx.connection()
                        .prepareStatement("INSERT INTO applied (event_id, part, off, amount) VALUES (?, ?, ?, ?)");
                PreparedStatement upd =
                        tx.connection().prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            for (Delivery d : claimed) {
                long amount = Long.parseLong(d.payloadText());
                int at = d.source().lastIndexOf('@');
                int slash = d.source().lastIndexOf('/');
                ins.setString(1, d.eventId());
                ins.setInt(2, Integer.parseInt(d.source().substring(slash + 1, at)));
                ins.setLong(3, Long.parseLong(d.source().substring(at + 1)));
                ins.setLong(4, amount);
                ins.addBatch();
                sum += amount;
            }
            ins.executeBatch();
            upd.setLong(1, sum);
            upd.executeUpdate();
        }
    };

    static TestDatabase database() {
        return TestPostgres.shared().freshDatabase().execute(SCHEMA);
    }

    /** JDBC URL of a test database, for a child JVM. */
    static String jdbcUrl(TestDatabase db) {
        String url = TestPostgres.shared().jdbcUrl();
        return url + (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
    }

    static Map<String, Object> consumerProperties(TestKafka kafka, String group) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(kafka.sessionTimeoutMs()));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(kafka.sessionTimeoutMs() / 4));
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrapServers) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        // One request in flight, as KafkaPublisher has: with five, a batch pipelined behind the
        // producer's first batch to a partition can be written before it when that one is sent again
        // (split or retried), and the broker then answers OUT_OF_ORDER_SEQUENCE_NUMBER to it until
        // the delivery timeout (seen on a loaded 2-core machine).
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Publishes each event to its partition with the event id header, and waits for every ack. */
    static void publish(String bootstrapServers, String topic, List<Event> events) {
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrapServers)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>(events.size());
            for (Event e : events) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(
                        topic, e.partition(), null, Long.toString(e.amount()).getBytes(StandardCharsets.UTF_8));
                r.headers().add(OutboxMessage.EVENT_ID_HEADER, e.id().getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        } catch (InterruptedException | ExecutionException e) {
            throw new IllegalStateException("publishing to " + topic + " failed: " + e, e);
        }
    }

    static long balance(TestDatabase db) {
        return db.queryLong("SELECT balance FROM account WHERE id = 1");
    }

    static long appliedRows(TestDatabase db) {
        return db.queryLong("SELECT count(*) FROM applied");
    }

    static long distinctApplied(TestDatabase db) {
        return db.queryLong("SELECT count(DISTINCT event_id) FROM applied");
    }

    /** Rows whose event id was applied more than once. */
    static long appliedTwice(TestDatabase db) {
        return db.queryLong("SELECT count(*) - count(DISTINCT event_id) FROM applied");
    }

    /** Pairs of effects of one partition applied out of offset order. */
    static long outOfOrder(TestDatabase db) {
        return db.queryLong("SELECT count(*) FROM (SELECT off < lag(off) OVER (PARTITION BY part ORDER BY seq) AS back"
                + " FROM applied) x WHERE back");
    }
}
