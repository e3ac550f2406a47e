package dev.once.cli.demo;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One side of the page: a consumer group of {@value #WORKERS} real Kafka consumers reading the
 * payments topic, each on its own thread, and what they do with a batch ({@link #process}).
 * Offsets are committed by hand after processing, the way every at-least-once consumer does, so
 * the faults of {@link Faults} produce real redeliveries.
 */
abstract class Lane implements AutoCloseable {

    static final int WORKERS = 2;
    /** Short, so that a slow batch costs the group membership within seconds. */
    static final Duration MAX_POLL_INTERVAL = Duration.ofSeconds(3);
    /**
     * How long the slow batch of {@link Fault#SLOW_BATCH_REBALANCE} takes: past {@link #MAX_POLL_INTERVAL},
     * with a margin so that a busy machine's late heartbeat thread still sees the poll interval expire.
     */
    static final Duration SLOW_BATCH = Duration.ofSeconds(5);

    static final String EVENT_ID_HEADER = "once-event-id";
    private static final int LOG_LINES = 8;

    final String name;
    final Faults faults;
    final AtomicLong deliveries = new AtomicLong();
    final AtomicInteger inFlight = new AtomicInteger();
    final AtomicInteger crashes = new AtomicInteger();
    final AtomicInteger refusedCommits = new AtomicInteger();
    private final Deque<String> log = new ArrayDeque<>();
    private final String bootstrap;
    private final String topic;
    private final String group;
    private final List<Worker> workers = new ArrayList<>();

    Lane(String name, String bootstrap, String topic, String group, Faults faults) {
        this.name = name;
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.group = group;
        this.faults = faults;
    }

    void start() {
        for (int i = 1; i <= WORKERS; i++) {
            Worker w = new Worker("w" + i);
            workers.add(w);
            w.thread.start();
        }
    }

    String group() {
        return group;
    }

    /**
     * Processes one batch in delivery order. Returns, per record, whether its offset may be
     * committed; a record that may not is read again from the broker.
     */
    abstract boolean[] process(List<Payment> batch, String worker) throws Exception;

    void log(String line) {
        synchronized (log) {
            log.addFirst(line);
            while (log.size() > LOG_LINES) {
                log.removeLast();
            }
        }
    }

    List<String> recentLog() {
        synchronized (log) {
            return List.copyOf(log);
        }
    }

    @Override
    public void close() {
        for (Worker w : workers) {
            w.running = false;
            w.wakeup();
        }
        try {
            for (Worker w : workers) {
                w.thread.join(10_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the workers are told to stop; do not wait further
        }
    }

    private KafkaConsumer<String, String> newConsumer(String worker) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + worker);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false"); // commit after processing, by hand
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, (int) MAX_POLL_INTERVAL.toMillis());
        // Frequent heartbeats: the other worker hears of a rebalance within a fraction of a second.
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 300);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    /** One consumer of the group, on its own thread; replaced by a new consumer when it "crashes". */
    private final class Worker implements Runnable {
        final String id;
        final Thread thread;
        volatile boolean running = true;
        volatile KafkaConsumer<String, String> consumer;

        Worker(String id) {
            this.id = id;
            this.thread = new Thread(this, "once-demo-" + name + "-" + id);
            this.thread.setDaemon(true);
        }

        void wakeup() {
            KafkaConsumer<String, String> c = consumer;
            if (c != null) {
                c.wakeup();
            }
        }

        @Override
        public void run() {
            consumer = newConsumer(id);
            try {
                while (running) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    inFlight.incrementAndGet();
                    try {
                        batch(records);
                    } finally {
                        inFlight.decrementAndGet();
                    }
                }
            } catch (WakeupException | InterruptedException e) {
                // closing
            } catch (RuntimeException e) {
                log(id + " stopped: " + e);
                throw e;
            } finally {
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(2)));
            }
        }

        private void batch(ConsumerRecords<String, String> records) throws InterruptedException {
            List<ConsumerRecord<String, String>> list = new ArrayList<>();
            records.forEach(list::add);
            List<Payment> batch = new ArrayList<>();
            for (ConsumerRecord<String, String> r : list) {
                batch.add(Payment.of(eventId(r), r.value()));
            }
            List<String> ids = batch.stream().map(Payment::eventId).toList();
            deliveries.addAndGet(list.size());

            String slow = faults.take(name, Fault.SLOW_BATCH_REBALANCE, ids);
            if (slow != null) {
                log(id + " is slow on the batch with " + slow + ": " + SLOW_BATCH.toSeconds()
                        + " s > max.poll.interval.ms " + MAX_POLL_INTERVAL.toSeconds() + " s, the group rebalances");
                Thread.sleep(SLOW_BATCH.toMillis()); // the slow work itself, not a wait for a condition
            }
            faults.meet(name, ids, 1_000);

            boolean[] ack;
            try {
                ack = process(batch, id);
            } catch (Exception e) {
                log(id + " failed a batch, it will be read again: " + e.getMessage());
                ack = new boolean[list.size()];
            }

            String crash = faults.take(name, Fault.CRASH_IN_ACK_GAP, ids);
            if (crash != null) {
                // The crash: the database has committed, the offset has not. close() without a
                // commit (auto-commit is off), and a new consumer takes over from the last commit.
                log(id + " crashed after committing " + crash + " and before committing its offset; restarting");
                crashes.incrementAndGet();
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(2)));
                consumer = newConsumer(id);
                return;
            }
            commit(list, ack);
        }

        private void commit(List<ConsumerRecord<String, String>> list, boolean[] ack) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            Set<TopicPartition> stopped = new java.util.HashSet<>();
            for (int i = 0; i < list.size(); i++) {
                ConsumerRecord<String, String> r = list.get(i);
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                if (stopped.contains(tp)) {
                    continue;
                }
                if (ack[i]) {
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                } else {
                    stopped.add(tp);
                    consumer.seek(tp, r.offset()); // read it again
                }
            }
            if (offsets.isEmpty()) {
                return;
            }
            try {
                consumer.commitSync(offsets);
            } catch (CommitFailedException | RebalanceInProgressException e) {
                refusedCommits.incrementAndGet();
                log(
                        id
                                + "'s offset commit was refused: the group rebalanced while it worked; its batch goes to a new owner");
            }
        }
    }

    private static String eventId(ConsumerRecord<String, String> r) {
        Header h = r.headers().lastHeader(EVENT_ID_HEADER);
        return h == null
                ? r.topic() + "/" + r.partition() + "@" + r.offset()
                : new String(h.value(), StandardCharsets.UTF_8);
    }
}
