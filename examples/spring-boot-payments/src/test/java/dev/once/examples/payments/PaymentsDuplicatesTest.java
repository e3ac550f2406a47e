package dev.once.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testkit.spring.SpringAckGap;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Real duplicates through the example application (real Kafka, real PostgreSQL, an HTTP provider
 * that counts charges): the ledger moves once per payment and the provider charges once, however the
 * payment is delivered again.
 */
class PaymentsDuplicatesTest {

    static TestKafka kafka;
    static TestDatabase db;
    static String topic;
    static String batchTopic;
    static HttpServer provider;
    /** Provider calls per Idempotency-Key: a real provider charges once per key. */
    static final Map<String, AtomicInteger> charges = new ConcurrentHashMap<>();

    static ConfigurableApplicationContext app;

    @BeforeAll
    static void start() throws IOException {
        kafka = TestKafka.shared();
        topic = kafka.createTopic("example-payments", 2);
        batchTopic = kafka.createTopic("example-payments-batch", 1);
        db = TestPostgres.shared().freshDatabase(8);
        db.execute(
                "CREATE TABLE payment (event_id varchar(255) PRIMARY KEY, account varchar(100) NOT NULL,"
                        + " amount bigint NOT NULL)",
                "CREATE TABLE ledger (account varchar(100) PRIMARY KEY, balance bigint NOT NULL)",
                "INSERT INTO ledger VALUES ('double', 0), ('concurrent', 0), ('crash', 0), ('batch-a', 0), ('batch-b', 0)");
        provider = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        provider.createContext("/charges", exchange -> {
            String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
            charges.computeIfAbsent(String.valueOf(key), k -> new AtomicInteger())
                    .incrementAndGet();
            exchange.getRequestBody().readAllBytes();
            byte[] body = "{\"status\":\"charged\"}".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        provider.start();
        app = new SpringApplicationBuilder(PaymentsApplication.class).run(args("payments-main", topic));
    }

    @AfterAll
    static void stop() {
        if (app != null) {
            app.close();
        }
        if (provider != null) {
            provider.stop(0);
        }
        if (db != null) {
            db.close();
        }
    }

    static String[] args(String group, String topic) {
        return new String[] {
            "--spring.datasource.url=" + ((HikariDataSource) db.dataSource()).getJdbcUrl(),
            "--spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
            "--spring.kafka.consumer.group-id=" + group,
            "--spring.kafka.consumer.properties.session.timeout.ms=" + kafka.sessionTimeoutMs(),
            "--spring.kafka.consumer.properties.heartbeat.interval.ms=" + kafka.sessionTimeoutMs() / 4,
            "--spring.kafka.listener.concurrency=2",
            "--payments.topic=" + topic,
            "--payments.batch-topic=" + batchTopic,
            "--payments.batch-group=" + group + "-batch",
            "--payments.provider-url=http://127.0.0.1:" + provider.getAddress().getPort() + "/charges",
            "--once.relay.poll-interval=200ms",
            "--spring.main.banner-mode=off"
        };
    }

    static void publish(String topic, Integer partition, String eventId, String value) {
        try (KafkaProducer<String, String> p = new KafkaProducer<>(
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()),
                new StringSerializer(),
                new StringSerializer())) {
            var record = new ProducerRecord<>(topic, partition, eventId, value);
            record.headers().add("once-event-id", eventId.getBytes(StandardCharsets.UTF_8));
            p.send(record).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static long balance(String account) {
        return db.queryLong("SELECT balance FROM ledger WHERE account = '" + account + "'");
    }

    static int charged(String eventId) {
        AtomicInteger n = charges.get("charge:" + eventId);
        return n == null ? 0 : n.get();
    }

    @Test
    void doublePublishCreditsAndChargesOnce() {
        publish(topic, 0, "pay-double-1", "double,20");
        publish(topic, 0, "pay-double-1", "double,20"); // the producer retried: same event id
        publish(topic, 1, "pay-double-2", "double,20"); // a second $20 payment: counts
        await().atMost(Duration.ofSeconds(60))
                .until(() -> charged("pay-double-1") >= 1 && charged("pay-double-2") >= 1);
        assertThat(balance("double")).as("ledger credited once per payment").isEqualTo(40);
        assertThat(db.queryLong("SELECT count(*) FROM payment WHERE account = 'double'"))
                .isEqualTo(2);
        assertThat(charged("pay-double-1")).as("provider charged once").isEqualTo(1);
    }

    @Test
    void aBatchListenerCreditsSetWiseAndOncePerPayment() {
        publish(batchTopic, 0, "pay-batch-1", "batch-a,10");
        publish(batchTopic, 0, "pay-batch-2", "batch-b,5");
        publish(batchTopic, 0, "pay-batch-1", "batch-a,10"); // the producer retried
        publish(batchTopic, 0, "pay-batch-3", "batch-a,1");
        await().atMost(Duration.ofSeconds(60))
                .until(() -> db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'payments-batch'") == 3);
        assertThat(balance("batch-a"))
                .as("effect applied exactly once per payment")
                .isEqualTo(11);
        assertThat(balance("batch-b")).isEqualTo(5);
        assertThat(db.queryLong("SELECT count(*) FROM payment WHERE account LIKE 'batch-%'"))
                .isEqualTo(3);
    }

    @Test
    void concurrentDeliveriesOfOnePaymentApplyOnce() throws Exception {
        // the same event on both partitions: two listener threads process it at the same time
        List<Thread> senders = new ArrayList<>();
        for (int partition = 0; partition < 2; partition++) {
            int p = partition;
            Thread t = new Thread(() -> publish(topic, p, "pay-concurrent-1", "concurrent,20"));
            senders.add(t);
            t.start();
        }
        for (Thread t : senders) {
            t.join();
        }
        await().atMost(Duration.ofSeconds(60)).until(() -> charged("pay-concurrent-1") >= 1);
        await().atMost(Duration.ofSeconds(30))
                .until(() -> db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id = 'pay-concurrent-1'") == 1);
        assertThat(balance("concurrent")).as("effect applied exactly once").isEqualTo(20);
        assertThat(charged("pay-concurrent-1")).isEqualTo(1);
    }

    @Test
    void crashBetweenTheDatabaseCommitAndTheOffsetCommitAppliesAndChargesOnce() throws Exception {
        String crashTopic = kafka.createTopic("example-payments-crash", 1);
        // the application in a child JVM, SIGKILLed after pay-crash-1's commit and before its offset commit
        SpringAckGap.killAfterCommit(
                PaymentsApplication.class,
                args("payments-crash", crashTopic),
                "pay-crash-1",
                () -> publish(crashTopic, 0, "pay-crash-1", "crash,20"));
        assertThat(balance("crash"))
                .as("the database commit happened before the crash")
                .isEqualTo(20);
        // the same consumer group starts again and is handed pay-crash-1 again
        try (ConfigurableApplicationContext restarted =
                new SpringApplicationBuilder(PaymentsApplication.class).run(args("payments-crash", crashTopic))) {
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> db.queryLong(
                                            "SELECT count(*) FROM once_outbox WHERE idempotency_key = 'charge:pay-crash-1' AND status <> 'pending'")
                                    == 1
                            && committed(restarted));
        }
        assertThat(balance("crash"))
                .as("the redelivery is a duplicate: credited once")
                .isEqualTo(20);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE idempotency_key = 'charge:pay-crash-1'"))
                .as("one charge enqueued, so one idempotency key at the provider")
                .isEqualTo(1);
        assertThat(charged("pay-crash-1"))
                .as("the provider saw the charge (a relay resend carries the same key)")
                .isBetween(1, 2);
        System.out.println(
                "CRASH example=payments provider_calls=" + charged("pay-crash-1") + " ledger=" + balance("crash"));
    }

    static boolean committed(ConfigurableApplicationContext context) {
        try (var admin = kafka.admin()) {
            return !admin.listConsumerGroupOffsets("payments-crash")
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .isEmpty();
        } catch (Exception e) {
            return false;
        }
    }
}
