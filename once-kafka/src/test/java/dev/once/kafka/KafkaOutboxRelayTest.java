package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import dev.once.testkit.kafka.TestKafka;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;

/**
 * The outbox relay with {@link KafkaPublisher} into a topic of two partitions, consumed by a
 * {@link KafkaConsumerRunner} around the contract's consumer. The topic refuses records above
 * {@value #TOPIC_MAX_BYTES} bytes: a missing topic cannot be told from an outage in Kafka (the
 * producer waits for its metadata either way), so the refused row is one too large for the topic.
 */
class KafkaOutboxRelayTest extends OutboxRelayContract {

    private static final String TOPIC_MAX_BYTES = "1000";

    private final TestKafka kafka = TestKafka.shared();
    private final List<KafkaPublisher> publishers = new ArrayList<>();

    @Override
    protected String createDestination(String name) {
        kafka.createTopic(name, 2, Map.of("max.message.bytes", TOPIC_MAX_BYTES));
        return name;
    }

    @Override
    protected void deleteDestination(String topic) throws Exception {
        publishers.forEach(KafkaPublisher::close);
        try (Admin admin = kafka.admin()) {
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
        }
    }

    @Override
    protected Publisher publisher() {
        return keep(KafkaPublisher.create(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers())));
    }

    @Override
    protected Refused refusedRow(String topic) {
        return new Refused(topic, new byte[5000], 10); // Kafka's MESSAGE_TOO_LARGE
    }

    @Override
    protected Publisher unreachablePublisher() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        return keep(KafkaPublisher.create(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                "127.0.0.1:" + port,
                ProducerConfig.MAX_BLOCK_MS_CONFIG,
                "1000")));
    }

    @Override
    protected AutoCloseable startConsumer(String topic, IdempotentConsumer consumer) {
        return KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, "contract-" + topic))
                .topics(topic)
                .idempotentConsumer(consumer)
                .build()
                .start();
    }

    @Override
    protected long messagesStored(String topic) throws Exception {
        try (Admin admin = kafka.admin()) {
            Map<TopicPartition, OffsetSpec> ends = Map.of(
                    new TopicPartition(topic, 0),
                    OffsetSpec.latest(),
                    new TopicPartition(topic, 1),
                    OffsetSpec.latest());
            long stored = 0;
            for (ListOffsetsResultInfo end :
                    admin.listOffsets(ends).all().get(30, TimeUnit.SECONDS).values()) {
                stored += end.offset();
            }
            return stored;
        }
    }

    @Override
    protected boolean brokerDeduplicates() {
        return false; // the idempotent producer drops its own retries, not the relay's re-send
    }

    @Override
    protected void checkReceipts(String firstSend, String reSend) {
        assertThat(firstSend).as("where the record was written").matches("\\S+-\\d@\\d+");
        assertThat(reSend)
                .as("a re-send is a new record")
                .matches("\\S+-\\d@\\d+")
                .isNotEqualTo(firstSend);
    }

    private KafkaPublisher keep(KafkaPublisher publisher) {
        publishers.add(publisher);
        return publisher;
    }
}
