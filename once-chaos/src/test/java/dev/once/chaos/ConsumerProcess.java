package dev.once.chaos;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.PullSubscribeOptions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One consumer process of {@link ManyConsumerProcessesTest}: consumes a Kafka topic in a group, a
 * RabbitMQ queue or a NATS JetStream durable consumer, applies each event through the engine
 * (inserting a row naming this instance, so the test can count each instance's share) and
 * acknowledges after the commit. Prints {@code READY} once consuming; SIGTERM stops it after the
 * batch in hand (a rolling restart), SIGKILL anywhere.
 *
 * <p>Arguments: {@code kafka BOOTSTRAP TOPIC GROUP | rabbitmq QUEUE | nats STREAM DURABLE}, then
 * the JDBC URL and the instance name, last.
 */
public final class ConsumerProcess {

    /** Environment variable: {@code 1} runs the broken consumer that commits the effect without a claim. */
    static final String NO_CLAIM = "ONCE_CHAOS_NO_CLAIM";

    private ConsumerProcess() {}

    private static Outcome withoutClaim(HikariDataSource ds, Delivery d, String instance) {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO " + Effects.TABLE + " (event_id, applied_at, instance) VALUES (?, ?, ?)")) {
            ps.setString(1, d.eventId());
            ps.setLong(2, System.nanoTime());
            ps.setString(3, instance);
            ps.executeUpdate();
            return Outcome.applied(d.eventId());
        } catch (SQLException e) {
            return new Outcome(d.eventId(), Outcome.Status.FAILED_RETRYABLE, e);
        }
    }

    public static void main(String[] args) throws Exception {
        String jdbcUrl = args[args.length - 2];
        String instance = args[args.length - 1];
        HikariDataSource ds = Databases.pool(jdbcUrl, 2, "consumer-" + instance);
        Handler handler = (d, tx) -> {
            try (PreparedStatement ps = tx.connection()
                    .prepareStatement(
                            "INSERT INTO " + Effects.TABLE + " (event_id, applied_at, instance) VALUES (?, ?, ?)")) {
                ps.setString(1, d.eventId());
                ps.setLong(2, System.nanoTime());
                ps.setString(3, instance);
                ps.executeUpdate();
            }
        };
        IdempotentConsumer once = IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("many")
                .handler(handler)
                .build();
        // The deliberate break: the effect committed with no claim, so every redelivery and re-send applies again.
        Function<Delivery, Outcome> single =
                "1".equals(System.getenv(NO_CLAIM)) ? d -> withoutClaim(ds, d, instance) : once::process;
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            try {
                stopped.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            switch (args[0]) {
                case "kafka" -> kafka(args[1], args[2], args[3], once, stop);
                case "rabbitmq" -> rabbit(args[1], single, stop);
                case "nats" -> nats(args[1], args[2], single, stop);
                default ->
                    throw new IllegalArgumentException("broker must be kafka, rabbitmq or nats, but was " + args[0]);
            }
        } finally {
            ds.close();
            stopped.countDown();
        }
    }

    /** One processBatch per poll; offsets committed after the database commit; seek back to the first not acknowledged. */
    private static void kafka(
            String bootstrap, String topic, String group, IdempotentConsumer once, AtomicBoolean stop) {
        Map<String, Object> props = Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG,
                group,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
                false,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                "earliest",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                200,
                ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
                6_000,
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                1_000);
        try (KafkaConsumer<String, String> c =
                new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            System.out.println("READY");
            while (!stop.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = c.poll(Duration.ofMillis(200));
                } catch (RuntimeException e) {
                    continue; // a broker going away mid-poll: poll again
                }
                if (records.isEmpty()) {
                    continue;
                }
                List<ConsumerRecord<String, String>> list = new ArrayList<>();
                records.forEach(list::add);
                List<Outcome> outcomes = once.processBatch(list.stream()
                        .map(r -> Delivery.builder(r.key())
                                .source("kafka:" + r.topic() + "/" + r.partition())
                                .build())
                        .toList());
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                Map<TopicPartition, Long> rewind = new HashMap<>();
                for (int i = 0; i < list.size(); i++) {
                    ConsumerRecord<String, String> r = list.get(i);
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (rewind.containsKey(tp)) {
                        continue;
                    }
                    if (outcomes.get(i).shouldAcknowledge()) {
                        commit.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    } else {
                        rewind.put(tp, r.offset());
                    }
                }
                rewind.forEach(c::seek);
                try {
                    c.commitSync(commit, Duration.ofSeconds(10));
                } catch (RuntimeException e) {
                    // a rebalance or a broker bounce: redelivered to whoever owns the partition, absorbed
                }
            }
        }
    }

    /** Competing consumers on one queue, prefetch 50, ack after the commit, requeue otherwise. */
    private static void rabbit(String queue, Function<Delivery, Outcome> once, AtomicBoolean stop) throws Exception {
        ConnectionFactory f = new ConnectionFactory();
        f.setHost("127.0.0.1");
        f.setPort(5672);
        try (var connection = f.newConnection("once-many")) {
            Channel ch = connection.createChannel();
            ch.basicQos(50);
            ch.basicConsume(queue, false, new DefaultConsumer(ch) {
                @Override
                public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body)
                        throws java.io.IOException {
                    if (stop.get()) {
                        return; // not acknowledged: requeued when the channel closes
                    }
                    Outcome o = once.apply(Delivery.builder(props.getMessageId())
                            .redelivered(env.isRedeliver())
                            .build());
                    if (o.shouldAcknowledge()) {
                        ch.basicAck(env.getDeliveryTag(), false);
                    } else {
                        ch.basicNack(env.getDeliveryTag(), false, true);
                    }
                }
            });
            System.out.println("READY");
            while (!stop.get()) {
                Thread.sleep(50);
            }
        }
    }

    /** Competing pull subscribers bound to one durable consumer; ack after the commit, nak otherwise. */
    private static void nats(String stream, String durable, Function<Delivery, Outcome> once, AtomicBoolean stop)
            throws Exception {
        try (var connection = Nats.connect(new Options.Builder()
                .server("nats://127.0.0.1:4222")
                .maxReconnects(-1)
                .build())) {
            JetStreamSubscription sub =
                    connection.jetStream().subscribe(null, PullSubscribeOptions.bind(stream, durable));
            System.out.println("READY");
            while (!stop.get()) {
                for (Message m : sub.fetch(50, Duration.ofMillis(200))) {
                    Outcome o = once.apply(Delivery.builder(new String(m.getData(), StandardCharsets.UTF_8))
                            .build());
                    if (o.shouldAcknowledge()) {
                        m.ack();
                    } else {
                        m.nak();
                    }
                }
            }
        }
    }
}
