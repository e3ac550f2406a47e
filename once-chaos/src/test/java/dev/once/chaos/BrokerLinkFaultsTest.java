package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutures;
import com.google.api.gax.batching.FlowControlSettings;
import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.cloud.pubsub.v1.AckReplyConsumer;
import com.google.cloud.pubsub.v1.Subscriber;
import com.google.cloud.pubsub.v1.SubscriptionAdminClient;
import com.google.cloud.pubsub.v1.SubscriptionAdminSettings;
import com.google.cloud.pubsub.v1.TopicAdminClient;
import com.google.cloud.pubsub.v1.TopicAdminSettings;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.TopicName;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.KafkaCluster;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.Services;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPubSubEmulator;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.nats.client.JetStream;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.PullSubscribeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * R8 on the broker links: a {@link FaultProxy} between the consumer and RabbitMQ, Kafka (a broker
 * of the test's own advertising the proxy, {@link KafkaCluster#behindProxy}), NATS JetStream or Google
 * Cloud Pub/Sub (Google's emulator), while 2,000 events (6,000 times the scale in the report) and 10%
 * producer duplicates (published straight to the broker) flow through the engine into PostgreSQL: the
 * link frozen for two seconds, every connection reset (the broker requeues what was delivered and not
 * acknowledged; acknowledgements in flight are lost), 200 ms added to every round trip for two
 * seconds. Each consumer acknowledges only after the database commit, as the adapters do. Figures:
 * lost (published, never applied), applied twice, seconds from each fault's end to
 * {@value NetworkFaultsUnderLoadTest#RECOVERED} of the rate before.
 */
@Tag("chaos")
@RunsAlone
class BrokerLinkFaultsTest {

    private static final Duration FAULT = Duration.ofSeconds(2);

    @Test
    void rabbitMqLinkFaultsLoseNothingAndApplyNothingTwice() throws Exception {
        assertClean(run(new Rabbit(), false));
    }

    @Test
    void kafkaLinkFaultsLoseNothingAndApplyNothingTwice() throws Exception {
        assertClean(run(new Kafka(), false));
    }

    @Test
    void natsLinkFaultsLoseNothingAndApplyNothingTwice() throws Exception {
        assertClean(run(new NatsJetStream(), false));
    }

    @Test
    void pubSubLinkFaultsLoseNothingAndApplyNothingTwice() throws Exception {
        assertClean(run(new PubSub(), false));
    }

    /**
     * The deliberate break: the same faults on RabbitMQ against a consumer that claims a key of each
     * delivery instead of the event id (as a consumer keying on the broker's delivery tag would), at
     * the same cost per event, so the redeliveries after the reset apply again. An event applies twice
     * only when the reset catches an acknowledgement in flight after its commit; on a loaded machine the
     * reset can fall where none is (seen once in a full build), so the run is repeated, up to three times,
     * until one does: the point is that the figures see the break when it happens.
     */
    @Test
    void aClaimOnTheDeliveryInsteadOfTheEventLetsTheResetsRedeliveriesApplyTwice() throws Exception {
        Chaos.Figure f = run(new Rabbit(), true);
        for (int tries = 1; tries < 3 && f.get("twice_published_once") == 0; tries++) {
            f = run(new Rabbit(), true);
        }
        assertThat(f.get("twice_published_once"))
                .as("events published once and applied twice")
                .isPositive();
    }

    private static void assertClean(Chaos.Figure f) {
        assertThat(f.get("lost")).as("events published and never applied").isZero();
        assertThat(f.get("applied_twice")).as("events applied more than once").isZero();
    }

    /** One broker: where it listens, publishing straight to it, and a consumer through the proxy. */
    interface Link {
        String name();

        /** A proxy in front of the broker; skips (or fails, where CI requires it) when the broker cannot be reached. */
        FaultProxy proxy() throws Exception;

        void publish(List<String> ids) throws Exception;

        /** Starts consuming through {@code port}: {@code handle} true means acknowledge, then count it. */
        AutoCloseable consume(int port, Predicate<Delivery> handle, AtomicLong acks) throws Exception;

        /** Events of the run, from the scaled default; a broker slower than the others runs fewer. */
        default int events(int scaled) {
            return scaled;
        }

        /** How long the end of the run waits for every event to be applied before it counts the rest lost. */
        default Duration drain() {
            return Duration.ofMinutes(1);
        }
    }

    private static Chaos.Figure run(Link link, boolean claimPerDelivery) throws Exception {
        int events = link.events(Chaos.scaled(2_000, 6_000));
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
        try (TestDatabase db = Databases.POSTGRES.fresh(4);
                FaultProxy proxy = link.proxy()) {
            Effects.create(db);
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("broker-link-" + link.name())
                    .handler((d, tx) -> Effects.apply(tx.connection(), Delivery.of(d.payloadText(), "")))
                    .build();
            AtomicLong delivery = new AtomicLong();
            Predicate<Delivery> handle = d -> {
                try {
                    // The break: every delivery its own key; the effect still records the event id (the payload).
                    Delivery claimed = claimPerDelivery
                            ? Delivery.of(d.eventId() + "@" + delivery.incrementAndGet(), d.eventId())
                            : d;
                    return once.process(claimed).shouldAcknowledge();
                } catch (RuntimeException e) {
                    return false;
                }
            };
            AtomicLong acks = new AtomicLong();
            try (Producer producer = new Producer(link, events, acks);
                    Throughput throughput = new Throughput(acks::get);
                    AutoCloseable consumer = closingOnce(link.consume(proxy.port(), handle, acks))) {
                await("a tenth of the events").atMost(Duration.ofMinutes(1)).until(() -> acks.get() >= events / 10);
                double baseline = throughput.rate(Duration.ofSeconds(1));
                BooleanSupplier never = () -> false; // the producer keeps events coming until the faults are over
                double freeze = NetworkFaultsUnderLoadTest.fault(
                        throughput,
                        never,
                        baseline,
                        () -> NetworkFaultsUnderLoadTest.during(timer, FAULT, proxy::freeze, proxy::thaw));
                double reset = NetworkFaultsUnderLoadTest.fault(throughput, never, baseline, proxy::reset);
                double latency = NetworkFaultsUnderLoadTest.fault(
                        throughput,
                        never,
                        baseline,
                        () -> NetworkFaultsUnderLoadTest.during(
                                timer,
                                FAULT,
                                () -> proxy.latency(Duration.ofMillis(100)), // each way: 200 ms per round trip
                                () -> proxy.latency(Duration.ZERO)));
                List<String> ids = producer.finish();
                Set<String> distinct = new HashSet<>(ids);
                try {
                    await("every event applied and acknowledged")
                            .atMost(link.drain())
                            .until(() -> acks.get() >= ids.size() && applied(db) >= distinct.size());
                } catch (ConditionTimeoutException e) {
                    // counted below as lost: the figure says what is missing
                }
                consumer.close();
                Map<String, Long> counts = Effects.counts(db);
                return Chaos.figure("broker-link-" + link.name())
                        .rounds(distinct.size())
                        .lost(Effects.lost(distinct, counts))
                        .appliedTwice(Effects.appliedTwice(counts))
                        .put("messages", ids.size())
                        .put("twice_published_once", twicePublishedOnce(ids, counts))
                        .put("acks", acks.get())
                        .put("baseline_per_s", baseline)
                        .put("freeze_2s_recovery_s", freeze)
                        .put("reset_recovery_s", reset)
                        .put("latency_200ms_2s_recovery_s", latency)
                        .put("resets", proxy.resets())
                        .broken(claimPerDelivery ? "claim_per_delivery" : null)
                        .print();
            }
        } finally {
            timer.shutdownNow();
        }
    }

    /**
     * Publishes events straight to the broker, in batches, with a duplicate of one in ten, from
     * before the first fault until {@link #finish()} (and at least {@code min}), never more than
     * {@value #BACKLOG} ahead of the acknowledgements: so every fault meets a flowing stream and a
     * backlog to recover from, whatever the machine's speed.
     */
    static final class Producer implements AutoCloseable {
        static final int BACKLOG = 1_000;
        private final List<String> sent = java.util.Collections.synchronizedList(new ArrayList<>());
        private final AtomicBoolean finishing = new AtomicBoolean();
        private final java.util.concurrent.atomic.AtomicReference<Exception> failure =
                new java.util.concurrent.atomic.AtomicReference<>();
        private final Thread thread;

        Producer(Link link, int min, AtomicLong acks) {
            Random random = new Random(23);
            thread = new Thread(
                    () -> {
                        int i = 0;
                        try {
                            while (i < min || !finishing.get()) {
                                if (sent.size() - acks.get() >= BACKLOG) {
                                    java.util.concurrent.locks.LockSupport.parkNanos(1_000_000); // backpressure
                                    continue;
                                }
                                List<String> batch = new ArrayList<>();
                                for (int end = i + 100; i < end; i++) {
                                    batch.add("evt-" + i);
                                    if (random.nextInt(10) == 0) {
                                        batch.add("evt-" + random.nextInt(i + 1));
                                    }
                                }
                                link.publish(batch);
                                sent.addAll(batch);
                            }
                        } catch (Exception e) {
                            failure.set(e);
                        }
                    },
                    "broker-link-producer");
            thread.setDaemon(true);
            thread.start();
        }

        /** Stops publishing (once {@code min} are out) and returns every message published. */
        List<String> finish() throws Exception {
            finishing.set(true);
            thread.join(TimeUnit.MINUTES.toMillis(2));
            if (failure.get() != null) {
                throw failure.get();
            }
            return List.copyOf(sent);
        }

        @Override
        public void close() throws InterruptedException {
            finishing.set(true);
            thread.join(TimeUnit.MINUTES.toMillis(2));
        }
    }

    /** {@code c}, closed the first time only (the test stops the consumer before counting, then the block ends). */
    private static AutoCloseable closingOnce(AutoCloseable c) {
        AtomicBoolean closed = new AtomicBoolean();
        return () -> {
            if (closed.compareAndSet(false, true)) {
                c.close();
            }
        };
    }

    /** Events applied twice that the producer sent once: the double effects the faults' redeliveries caused. */
    private static long twicePublishedOnce(List<String> ids, Map<String, Long> counts) {
        Map<String, Long> sent = new HashMap<>();
        ids.forEach(id -> sent.merge(id, 1L, Long::sum));
        return counts.entrySet().stream()
                .filter(e -> e.getValue() > 1 && sent.getOrDefault(e.getKey(), 0L) == 1)
                .count();
    }

    private static long applied(TestDatabase db) {
        return db.queryLong("SELECT count(DISTINCT event_id) FROM " + Effects.TABLE);
    }

    /** RabbitMQ: a classic queue, manual acks, automatic connection recovery after a reset. */
    static final class Rabbit implements Link {
        private final String queue = "once-link-" + System.nanoTime();
        private Channel publishing;

        @Override
        public String name() {
            return "rabbitmq";
        }

        @Override
        public FaultProxy proxy() throws Exception {
            try (var c = factory(5672).newConnection();
                    Channel ch = c.createChannel()) {
                ch.queueDeclare(queue, true, false, false, null);
            } catch (Exception e) {
                throw Services.unavailable(
                        "rabbitmq", "start RabbitMQ on 127.0.0.1:5672 (rabbitmq-server -detached)", e);
            }
            return FaultProxy.start(new InetSocketAddress("127.0.0.1", 5672), WireProtocol.RAW);
        }

        private static ConnectionFactory factory(int port) {
            ConnectionFactory f = new ConnectionFactory();
            f.setHost("127.0.0.1");
            f.setPort(port);
            f.setAutomaticRecoveryEnabled(true);
            f.setNetworkRecoveryInterval(200);
            f.setRequestedHeartbeat(10);
            f.setConnectionTimeout(5_000);
            return f;
        }

        @Override
        public void publish(List<String> ids) throws Exception {
            if (publishing == null) {
                publishing = factory(5672).newConnection("once-link-producer").createChannel();
                publishing.confirmSelect();
            }
            for (String id : ids) {
                publishing.basicPublish(
                        "",
                        queue,
                        new AMQP.BasicProperties.Builder().messageId(id).build(),
                        id.getBytes(StandardCharsets.UTF_8));
            }
            publishing.waitForConfirmsOrDie(60_000);
        }

        @Override
        public AutoCloseable consume(int port, Predicate<Delivery> handle, AtomicLong acks) throws Exception {
            var connection = factory(port).newConnection("once-link-consumer");
            Channel ch = connection.createChannel();
            ch.basicQos(100);
            ch.basicConsume(queue, false, new DefaultConsumer(ch) {
                @Override
                public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body)
                        throws java.io.IOException {
                    Delivery d = Delivery.of(props.getMessageId(), new String(body, StandardCharsets.UTF_8));
                    try {
                        if (handle.test(d)) {
                            ch.basicAck(env.getDeliveryTag(), false);
                            acks.incrementAndGet();
                        } else {
                            ch.basicNack(env.getDeliveryTag(), false, true);
                        }
                    } catch (java.io.IOException | com.rabbitmq.client.ShutdownSignalException e) {
                        // the link is down: the broker requeues the delivery, the recovered channel gets it again
                    }
                }
            });
            return () -> {
                connection.abort();
                if (publishing != null) {
                    publishing.getConnection().abort();
                }
                try (var c = factory(5672).newConnection();
                        Channel admin = c.createChannel()) {
                    admin.queueDelete(queue);
                }
            };
        }
    }

    /**
     * Kafka: one broker whose advertised listener is the proxy, so after the bootstrap every
     * connection (fetch, group coordinator, offset commits) runs through it. One consumer, one
     * {@code processBatch} per poll, offsets committed after the database commit, and a seek back
     * to the first record not acknowledged, as {@code KafkaConsumerRunner} does.
     */
    static final class Kafka implements Link {
        private static final String TOPIC = "once-link";
        private KafkaCluster cluster;
        private KafkaProducer<String, String> producer;
        private String bootstrap;

        @Override
        public String name() {
            return "kafka";
        }

        @Override
        public FaultProxy proxy() throws Exception {
            try {
                cluster = KafkaCluster.behindProxy();
            } catch (Exception e) {
                throw Services.unavailable(
                        "kafka", "let the in-process broker start (free ports, a writable temporary directory)", e);
            }
            bootstrap = "127.0.0.1:" + cluster.proxy().port();
            try (var admin = cluster.admin()) {
                admin.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 1)))
                        .all()
                        .get(60, TimeUnit.SECONDS);
            }
            return cluster.proxy();
        }

        @Override
        public void publish(List<String> ids) throws Exception {
            if (producer == null) {
                // Straight to the broker, not through the proxy's advertised address: the faults are the consumer's.
                producer = new KafkaProducer<>(
                        Map.of(
                                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                                cluster.bootstrapServers(),
                                ProducerConfig.ACKS_CONFIG,
                                "all",
                                ProducerConfig.LINGER_MS_CONFIG,
                                5),
                        new StringSerializer(),
                        new StringSerializer());
            }
            List<java.util.concurrent.Future<?>> sends = new ArrayList<>();
            for (String id : ids) {
                sends.add(producer.send(new ProducerRecord<>(TOPIC, id, id)));
            }
            for (var f : sends) {
                f.get(2, TimeUnit.MINUTES);
            }
        }

        @Override
        public AutoCloseable consume(int port, Predicate<Delivery> handle, AtomicLong acks) {
            AtomicBoolean stop = new AtomicBoolean();
            Thread poller = new Thread(
                    () -> {
                        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(
                                Map.of(
                                        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                                        bootstrap,
                                        ConsumerConfig.GROUP_ID_CONFIG,
                                        "once-link",
                                        ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
                                        false,
                                        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                                        "earliest",
                                        ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                                        100),
                                new StringDeserializer(),
                                new StringDeserializer())) {
                            c.subscribe(List.of(TOPIC));
                            while (!stop.get()) {
                                poll(c, handle, acks);
                            }
                        }
                    },
                    "once-link-kafka");
            poller.setDaemon(true);
            poller.start();
            return () -> {
                stop.set(true);
                poller.join(30_000);
                if (producer != null) {
                    producer.close(Duration.ofSeconds(10));
                }
                cluster.close();
            };
        }

        private static void poll(KafkaConsumer<String, String> c, Predicate<Delivery> handle, AtomicLong acks) {
            ConsumerRecords<String, String> records;
            try {
                records = c.poll(Duration.ofMillis(200));
            } catch (RuntimeException e) {
                return; // the link broke mid-poll: poll again once the client has reconnected
            }
            Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
            Map<TopicPartition, Long> rewind = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                if (rewind.containsKey(tp)) {
                    continue;
                }
                if (handle.test(Delivery.of(r.value(), r.value()))) {
                    commit.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    acks.incrementAndGet();
                } else {
                    rewind.put(tp, r.offset());
                }
            }
            rewind.forEach(c::seek);
            try {
                c.commitSync(commit, Duration.ofSeconds(10));
            } catch (RuntimeException e) {
                // the next commit of the partition covers these offsets; a rebalance would redeliver them
            }
        }
    }

    /** NATS JetStream: a memory stream, a durable pull consumer with explicit acks and a 2 s ack wait. */
    static final class NatsJetStream implements Link {
        private final String stream = "once_link_" + System.nanoTime();
        private io.nats.client.Connection publishing;
        private static final String URL = "nats://127.0.0.1:4222";

        @Override
        public String name() {
            return "nats";
        }

        @Override
        public FaultProxy proxy() throws Exception {
            try (var c = Nats.connect(URL)) {
                c.jetStreamManagement()
                        .addStream(StreamConfiguration.builder()
                                .name(stream)
                                .subjects(stream)
                                .storageType(StorageType.Memory)
                                .build());
            } catch (Exception e) {
                throw Services.unavailable(
                        "nats", "start nats-server with JetStream on 127.0.0.1:4222 (nats-server -js)", e);
            }
            return FaultProxy.start(new InetSocketAddress("127.0.0.1", 4222), WireProtocol.RAW);
        }

        @Override
        public void publish(List<String> ids) throws Exception {
            if (publishing == null) {
                publishing = Nats.connect(URL);
            }
            JetStream js = publishing.jetStream();
            List<java.util.concurrent.CompletableFuture<?>> acks = new ArrayList<>();
            for (String id : ids) {
                acks.add(js.publishAsync(stream, id.getBytes(StandardCharsets.UTF_8)));
            }
            for (var a : acks) {
                a.get(2, TimeUnit.MINUTES);
            }
        }

        @Override
        public AutoCloseable consume(int port, Predicate<Delivery> handle, AtomicLong acks) throws Exception {
            try (var c = Nats.connect(URL)) {
                c.jetStreamManagement()
                        .addOrUpdateConsumer(
                                stream,
                                ConsumerConfiguration.builder()
                                        .durable("once")
                                        .ackPolicy(AckPolicy.Explicit)
                                        .ackWait(Duration.ofSeconds(2))
                                        .maxAckPending(1_000)
                                        .build());
            }
            var connection = Nats.connect(new Options.Builder()
                    .server("nats://127.0.0.1:" + port)
                    .maxReconnects(-1)
                    .reconnectWait(Duration.ofMillis(100))
                    .connectionTimeout(Duration.ofSeconds(2))
                    .build());
            JetStreamSubscription sub =
                    connection.jetStream().subscribe(null, PullSubscribeOptions.bind(stream, "once"));
            AtomicBoolean stop = new AtomicBoolean();
            Thread fetcher = new Thread(
                    () -> {
                        while (!stop.get()) {
                            try {
                                for (Message m : sub.fetch(100, Duration.ofMillis(200))) {
                                    String id = new String(m.getData(), StandardCharsets.UTF_8);
                                    if (handle.test(Delivery.of(id, id))) {
                                        m.ack();
                                        acks.incrementAndGet();
                                    } else {
                                        m.nak();
                                    }
                                }
                            } catch (RuntimeException e) {
                                // disconnected: the client reconnects; JetStream redelivers after the ack wait
                            }
                        }
                    },
                    "once-link-nats");
            fetcher.setDaemon(true);
            fetcher.start();
            return () -> {
                stop.set(true);
                fetcher.join(10_000);
                connection.close();
                if (publishing != null) {
                    publishing.close();
                }
                try (var c = Nats.connect(URL)) {
                    c.jetStreamManagement().deleteStream(stream);
                }
            };
        }
    }

    /**
     * Google Cloud Pub/Sub on Google's emulator: the client's {@code Subscriber} (streaming pull over
     * gRPC) through the proxy, acking after the commit and nacking otherwise; a 10 s ack deadline, so
     * what a reset leaves unacknowledged comes back soon.
     */
    static final class PubSub implements Link {
        private static final String PROJECT = "once-link";
        private final String id = "once-link-" + System.nanoTime();
        private final TopicName topic = TopicName.of(PROJECT, id);
        private final ProjectSubscriptionName subscription = ProjectSubscriptionName.of(PROJECT, id);
        private ManagedChannel direct;
        private com.google.cloud.pubsub.v1.Publisher publisher;

        /**
         * Gives every streaming pull a 5 s deadline (the client opens the next one). The emulator never
         * learns that a stream died with its connection (its gRPC server fails with a NoSuchMethodError on
         * the cancellation), so after the reset the dead stream lived on in it, taking half of every
         * message (new and redelivered) and giving each back only after its 10 s ack deadline: the drain
         * took 60-90 s. With a deadline the emulator ends the dead stream itself within 5 s.
         */
        static final ClientInterceptor STREAMS_END_WITHIN_5_S = new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(
                    MethodDescriptor<Q, R> method, CallOptions options, io.grpc.Channel next) {
                return next.newCall(
                        method,
                        method.getFullMethodName().equals("google.pubsub.v1.Subscriber/StreamingPull")
                                ? options.withDeadlineAfter(5, TimeUnit.SECONDS)
                                : options);
            }
        };

        @Override
        public String name() {
            return "pubsub";
        }

        /**
         * The emulator streams about 50 messages/s to one subscriber here, and closes an idle stream
         * every 20 s (it does not answer the client's keep-alive pings), redelivering what was on
         * it: a sixth of the events, and three minutes for the last redeliveries.
         */
        @Override
        public int events(int scaled) {
            return Math.max(1_000, scaled / 6);
        }

        @Override
        public Duration drain() {
            return Duration.ofMinutes(3);
        }

        @Override
        public FaultProxy proxy() throws Exception {
            String host = TestPubSubEmulator.host();
            direct = ManagedChannelBuilder.forTarget(host).usePlaintext().build();
            var channel = FixedTransportChannelProvider.create(GrpcTransportChannel.create(direct));
            try (var topics = TopicAdminClient.create(TopicAdminSettings.newBuilder()
                            .setTransportChannelProvider(channel)
                            .setCredentialsProvider(NoCredentialsProvider.create())
                            .build());
                    var subscriptions = SubscriptionAdminClient.create(SubscriptionAdminSettings.newBuilder()
                            .setTransportChannelProvider(channel)
                            .setCredentialsProvider(NoCredentialsProvider.create())
                            .build())) {
                topics.createTopic(topic);
                subscriptions.createSubscription(com.google.pubsub.v1.Subscription.newBuilder()
                        .setName(subscription.toString())
                        .setTopic(topic.toString())
                        .setAckDeadlineSeconds(10)
                        .build());
            }
            publisher = com.google.cloud.pubsub.v1.Publisher.newBuilder(topic)
                    .setChannelProvider(channel)
                    .setCredentialsProvider(NoCredentialsProvider.create())
                    .build();
            int colon = host.lastIndexOf(':');
            return FaultProxy.start(
                    new InetSocketAddress(host.substring(0, colon), Integer.parseInt(host.substring(colon + 1))),
                    WireProtocol.RAW);
        }

        @Override
        public void publish(List<String> ids) throws Exception {
            List<ApiFuture<String>> sent = new ArrayList<>();
            for (String id : ids) {
                sent.add(publisher.publish(PubsubMessage.newBuilder()
                        .setData(ByteString.copyFromUtf8(id))
                        .putAttributes("once-event-id", id)
                        .build()));
            }
            ApiFutures.allAsList(sent).get(2, TimeUnit.MINUTES);
        }

        @Override
        public AutoCloseable consume(int port, Predicate<Delivery> handle, AtomicLong acks) throws Exception {
            ManagedChannel viaProxy = ManagedChannelBuilder.forTarget("127.0.0.1:" + port)
                    .usePlaintext()
                    .intercept(STREAMS_END_WITHIN_5_S)
                    .build();
            Subscriber subscriber = Subscriber.newBuilder(subscription, (PubsubMessage m, AckReplyConsumer reply) -> {
                        String eventId = m.getAttributesOrThrow("once-event-id");
                        if (handle.test(Delivery.of(eventId, m.getData().toStringUtf8()))) {
                            reply.ack();
                            acks.incrementAndGet();
                        } else {
                            reply.nack();
                        }
                    })
                    .setChannelProvider(FixedTransportChannelProvider.create(GrpcTransportChannel.create(viaProxy)))
                    .setCredentialsProvider(NoCredentialsProvider.create())
                    .setMaxDurationPerAckExtensionDuration(Duration.ofSeconds(10))
                    .setFlowControlSettings(FlowControlSettings.newBuilder()
                            .setMaxOutstandingElementCount(100L)
                            .build())
                    .build();
            subscriber.startAsync().awaitRunning();
            return () -> {
                subscriber.stopAsync();
                try {
                    subscriber.awaitTerminated(30, TimeUnit.SECONDS);
                } catch (java.util.concurrent.TimeoutException | IllegalStateException e) {
                    // a stream the proxy broke may fail the subscriber: nothing left to stop
                }
                viaProxy.shutdownNow();
                publisher.shutdown();
                direct.shutdownNow();
            };
        }
    }
}
