package dev.once.kafka;

import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.broker.BrokerContract;
import dev.once.testkit.kafka.TestKafka;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * once-kafka through the shared broker contract, on a 2-partition topic per case. An event goes to
 * the partition its id hashes to and its copies to the other one, so with two consumers in the
 * group a copy reaches the consumer that does not hold the original.
 */
class KafkaBrokerContractTest extends BrokerContract {

    private static final String DEAD_LETTERS = ".dlt";

    @Override
    protected String createDestination(String name) {
        String topic = TestKafka.shared().createTopic(name, 2);
        TestKafka.shared().createTopic(topic + DEAD_LETTERS, 1, Map.of());
        return topic;
    }

    @Override
    protected void publish(String topic, List<Event> events) throws Exception {
        // KafkaLedger's producer: acks=all, one request in flight, every send awaited
        try (KafkaProducer<byte[], byte[]> producer =
                KafkaLedger.producer(TestKafka.shared().bootstrapServers())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>(events.size());
            for (Event e : events) {
                int partition = Math.floorMod(e.eventId().hashCode(), 2) ^ (e.copy() ? 1 : 0);
                ProducerRecord<byte[], byte[]> r =
                        new ProducerRecord<>(topic, partition, null, e.payload().getBytes(StandardCharsets.UTF_8));
                r.headers().add(OutboxMessage.EVENT_ID_HEADER, e.eventId().getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
    }

    @Override
    protected AutoCloseable startConsumer(String topic, IdempotentConsumer consumer, int batchSize) {
        TestKafka kafka = TestKafka.shared();
        return KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, topic))
                .kafkaProperties(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(batchSize)))
                .topics(topic)
                .idempotentConsumer(consumer)
                .deadLetterTopic(topic + DEAD_LETTERS)
                .build()
                .start();
    }

    @Override
    protected Map<String, String> childEnvironment() {
        return Map.of(TestKafka.BOOTSTRAP_ENV, TestKafka.shared().bootstrapServers());
    }

    @Override
    protected int batchSize() {
        return 50;
    }
}
