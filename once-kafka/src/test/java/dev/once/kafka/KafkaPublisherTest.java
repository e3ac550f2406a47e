package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.Outcome;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.Test;

class KafkaPublisherTest {

    private final TestKafka kafka = TestKafka.shared();

    private static OutboxMessage message(long id, String topic, String eventId, String idempotencyKey, long amount) {
        return new OutboxMessage(
                id,
                eventId,
                topic,
                "account-1",
                Long.toString(amount).getBytes(StandardCharsets.UTF_8),
                Map.of(OutboxMessage.EVENT_ID_HEADER, eventId, "trace", "t-" + id),
                idempotencyKey,
                0,
                Instant.now());
    }

    @Test
    void aResentMessageIsAbsorbedAndTwoMessagesOfOneEventStayTwo() {
        String topic = kafka.createTopic("publish", 3);
        try (KafkaPublisher publisher = KafkaPublisher.create(
                        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()));
                TestDatabase db = KafkaLedger.database()) {
            RecordMetadata first = publisher.send(message(1, topic, "order-7", "order-7", 5));
            publisher.send(message(1, topic, "order-7", "order-7", 5)); // the relay crashed before marking row 1 sent
            publisher.send(message(2, topic, "order-8#1", "order-8:line-1", 11));
            publisher.send(message(3, topic, "order-8#2", "order-8:line-2", 13));
            assertThat(first.topic()).isEqualTo(topic);

            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            try (KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
                    .kafkaProperties(KafkaLedger.consumerProperties(kafka, "pub-" + topic))
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .handler((d, tx) -> {
                        assertThat(d.headers()).containsKey("trace").containsKey(KafkaPublisher.IDEMPOTENCY_KEY_HEADER);
                        KafkaLedger.CREDIT.handle(d, tx);
                    })
                    .meterRegistry(meters)
                    .build()
                    .start()) {
                await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) == 4);
            }
            assertThat(Meters.duplicates(meters)).as("the re-send was absorbed").isEqualTo(1);
            assertThat(KafkaLedger.balance(db))
                    .as("5 once, both lines of order-8")
                    .isEqualTo(5 + 11 + 13);
        }
    }

    @Test
    void theRelayPublishesWhatAHandlerEnqueuedAndTheDownstreamRunnerAppliesItOnce() throws Exception {
        String topic = kafka.createTopic("relay", 2);
        try (TestDatabase db = KafkaLedger.database();
                KafkaPublisher publisher = KafkaPublisher.create(
                        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()))) {
            IdempotentConsumer orders = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> {
                        tx.outbox().add(topic, "account-1", "4".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                        tx.outbox().add(topic, "account-1", "6".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                    })
                    .build();
            assertThat(orders.process(Delivery.of("order-1", "")).status()).isEqualTo(Outcome.Status.APPLIED);
            try (OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .publisher(publisher)
                    .build()) {
                int sent = 0;
                for (int n = relay.relayOnce(); n > 0; n = relay.relayOnce()) {
                    sent += n; // one row per key per round: rows of a key leave in order
                }
                assertThat(sent).isEqualTo(2);
            }
            // A relay that crashed after sending and before marking would send the rows again, with their ids.
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT event_id FROM once_outbox ORDER BY id LIMIT 1")) {
                rs.next();
                publisher.send(new OutboxMessage(
                        1,
                        rs.getString(1),
                        topic,
                        "account-1",
                        "4".getBytes(StandardCharsets.UTF_8),
                        Map.of(),
                        rs.getString(1),
                        1,
                        Instant.now()));
            }
            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            try (KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
                    .kafkaProperties(KafkaLedger.consumerProperties(kafka, "relay-" + topic))
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .handler(KafkaLedger.CREDIT)
                    .meterRegistry(meters)
                    .build()
                    .start()) {
                await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) == 3);
            }
            assertThat(Meters.duplicates(meters)).as("the re-send absorbed").isEqualTo(1);
            assertThat(KafkaLedger.balance(db))
                    .as("both messages of the order applied, once each")
                    .isEqualTo(10);
        }
    }

    @Test
    void weakAcksIdempotenceOffOrPipelinedRequestsAreRejected() {
        assertThatThrownBy(() -> KafkaPublisher.create(
                        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "x:1", ProducerConfig.ACKS_CONFIG, "1")))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("acks must be 'all'");
        assertThatThrownBy(() -> KafkaPublisher.create(Map.of(
                        ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                        "x:1",
                        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                        "false")))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("enable.idempotence");
        assertThatThrownBy(() -> KafkaPublisher.create(Map.of(
                        ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                        "x:1",
                        ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
                        "5")))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("max.in.flight.requests.per.connection must be 1")
                .hasMessageContaining("'5'");
    }

    @Test
    void aRecordTooLargeIsAPermanentFailure() {
        String topic = kafka.createTopic("too-large", 1);
        try (KafkaPublisher publisher = KafkaPublisher.create(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                kafka.bootstrapServers(),
                ProducerConfig.MAX_REQUEST_SIZE_CONFIG,
                "1000"))) {
            OutboxMessage big =
                    new OutboxMessage(9, "big-1", topic, null, new byte[5000], Map.of(), "big-1", 0, Instant.now());
            assertThatThrownBy(() -> publisher.send(big))
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("outbox message 9");
        }
    }
}
