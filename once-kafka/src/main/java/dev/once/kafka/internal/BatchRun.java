package dev.once.kafka.internal;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.kafka.MissingEventIdPolicy;
import dev.once.kafka.internal.BatchVerdicts.Entry;
import dev.once.kafka.internal.OrderGuard.Plan;
import dev.once.kafka.internal.OrderGuard.Position;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One batch of a {@link PollLoop}, on its worker thread: turns records into deliveries (or into
 * entries without one, by the {@link MissingEventIdPolicy}), runs them through the idempotent
 * consumer behind the {@link OrderGuard}, lets {@link BatchVerdicts} decide what that means for each
 * partition, and writes the dead letters it asks for. Touches no {@code KafkaConsumer}. Not API.
 */
final class BatchRun {

    private static final Logger log = LoggerFactory.getLogger(BatchRun.class);

    private static final Duration DEAD_LETTER_SEND_TIMEOUT = Duration.ofSeconds(30);

    static final String DLT_REASON = "once-dlt-reason";
    static final String DLT_TOPIC = "once-dlt-topic";
    static final String DLT_PARTITION = "once-dlt-partition";
    static final String DLT_OFFSET = "once-dlt-offset";
    static final String DLT_CONSUMER = "once-dlt-consumer";

    private final RunnerSettings settings;
    private final BatchVerdicts verdicts;
    private final Producer<byte[], byte[]> deadLetters;
    private final String name;
    /** The header the id is read from when the extractor is {@link HeaderEventId}; else null. */
    private final String idHeader;

    BatchRun(RunnerSettings settings, BatchVerdicts verdicts, Producer<byte[], byte[]> deadLetters, String name) {
        this.settings = settings;
        this.verdicts = verdicts;
        this.deadLetters = deadLetters;
        this.name = name;
        this.idHeader = settings.eventIdExtractor() instanceof HeaderEventId h ? h.name() : null;
    }

    /** What the worker decided for each partition of a batch. */
    record Result(
            Map<TopicPartition, OffsetAndMetadata> commit,
            Map<TopicPartition, Long> seekTo,
            Map<TopicPartition, Integer> failuresAtSeek,
            Throwable fatal) {}

    Result process(List<ConsumerRecord<byte[], byte[]>> records) {
        Map<TopicPartition, List<Entry>> byPartition = new LinkedHashMap<>();
        List<Entry> withId = new ArrayList<>(records.size());
        // Each id's first position on each partition, the first occurrence first; its list index.
        // Sized for the batch's ids up front: grown from the default they were rehashed about eight times.
        int capacity = records.size() * 4 / 3 + 1;
        Map<String, List<Position>> positions = new HashMap<>(capacity);
        Map<String, Integer> order = new HashMap<>(capacity);
        Map<TopicPartition, NavigableMap<Long, String>> ids = new HashMap<>();
        // Under FAIL, a record without an id stops its partition: what follows it is not applied,
        // so no effect gets ahead of the record the runner stops at.
        Set<TopicPartition> stopped = new HashSet<>();
        boolean failOnMissing = settings.missingEventIdPolicy() == MissingEventIdPolicy.FAIL;
        // records dead-lettered after the transaction: no offset past them goes to the database
        Map<TopicPartition, Long> gaps = new HashMap<>();
        boolean deadLetterMissing = settings.missingEventIdPolicy() == MissingEventIdPolicy.DEAD_LETTER;
        // A poll's records come partition by partition: what is kept per partition is looked up when the
        // partition changes, not for every record (issue 21: this loop was half of the runner worker's CPU).
        Partition at = null;
        boolean spread = false; // an event on two partitions of the poll
        for (ConsumerRecord<byte[], byte[]> r : records) {
            if (at == null || at.partition != r.partition() || !at.topic.equals(r.topic())) {
                at = new Partition(r.topic(), r.partition(), byPartition, ids);
            }
            TopicPartition tp = at.tp;
            if (stopped.contains(tp)) {
                continue;
            }
            Entry e = entry(r, at, positions);
            at.entries.add(e);
            if (e.delivery == null && failOnMissing) {
                stopped.add(tp);
            } else if (e.delivery == null && deadLetterMissing) {
                gaps.putIfAbsent(tp, r.offset());
            } else if (e.delivery != null) {
                String id = e.delivery.eventId();
                order.putIfAbsent(id, withId.size());
                withId.add(e);
                at.ids().put(r.offset(), id);
                List<Position> seen = positions.get(id);
                if (seen == null) {
                    positions.put(id, List.of(new Position(tp, r.offset()))); // an id is on one partition, mostly
                } else if (!onPartition(seen, tp)) {
                    List<Position> more = new ArrayList<>(seen);
                    more.add(new Position(tp, r.offset()));
                    positions.put(id, more);
                    spread = true;
                }
            }
        }
        if (spread) {
            inPartitionOrder(withId, order, positions, ids);
        }
        Map<String, List<Position>> waiting = verdicts.waiting();
        if (!withId.isEmpty()) {
            List<Delivery> deliveries = withId.stream().map(e -> e.delivery).toList();
            // Without a guard (a prebuilt consumer) records after a failed one may be applied ahead
            // of its retry; the seek back below still replays from it and absorbs them as duplicates.
            List<Outcome> outcomes =
                    guarded(new Plan(positions, order, ids, waiting, gaps, positions.size()), deliveries);
            for (int i = 0; i < withId.size(); i++) {
                withId.get(i).outcome = outcomes.get(i);
            }
        }
        BatchVerdicts.Decision d = verdicts.decide(
                byPartition,
                this::deadLetter,
                e -> guarded(
                                new Plan(
                                        Map.of(e.delivery.eventId(), List.of(new Position(e.partition, e.offset()))),
                                        Map.of(),
                                        ids,
                                        waiting,
                                        gaps,
                                        positions.size()),
                                List.of(e.delivery))
                        .get(0));
        return new Result(d.commit(), d.seekTo(), d.failuresAtSeek(), d.fatal());
    }

    /**
     * Lists the poll so that each event comes after every record before it on each partition that holds
     * it ({@link OrderGuard#inPartitionOrder}; copies of an event keep their poll order, so its first
     * occurrence stays where {@code positions} has it first), and renumbers {@code order}. Listed partition
     * by partition, an event whose copy on the partition listed second stands behind records listed after
     * it was refused by the guard as behind records not tried yet, even when those were duplicates (a
     * per-event handler's transaction claims its part up front, so the guard cannot ask the inbox whether
     * such a record is settled), and every record behind it on its first partition was then held back,
     * each failing alone.
     */
    private static void inPartitionOrder(
            List<Entry> withId,
            Map<String, Integer> order,
            Map<String, List<Position>> positions,
            Map<TopicPartition, NavigableMap<Long, String>> ids) {
        List<Delivery> firsts = new ArrayList<>(order.size());
        for (int i = 0; i < withId.size(); i++) {
            Delivery d = withId.get(i).delivery;
            if (order.get(d.eventId()) == i) {
                firsts.add(d);
            }
        }
        List<Delivery> ordered = OrderGuard.inPartitionOrder(positions, ids, firsts);
        Map<String, Integer> rank = new HashMap<>(order.size() * 4 / 3 + 1);
        for (int i = 0; i < ordered.size(); i++) {
            rank.put(ordered.get(i).eventId(), i);
        }
        withId.sort(Comparator.comparingInt(e -> rank.get(e.delivery.eventId()))); // stable: copies keep their order
        order.clear();
        for (int i = 0; i < withId.size(); i++) {
            order.putIfAbsent(withId.get(i).delivery.eventId(), i);
        }
    }

    private List<Outcome> guarded(Plan plan, List<Delivery> deliveries) {
        return settings.orderGuard() == null
                ? settings.idempotentConsumer().processBatch(deliveries)
                : settings.orderGuard()
                        .guard(plan, () -> settings.idempotentConsumer().processBatch(deliveries));
    }

    /** What the loop keeps for the partition of the records it is reading. */
    private static final class Partition {
        final String topic;
        final int partition;
        final TopicPartition tp;
        final List<Entry> entries;
        final String source;
        private final Map<TopicPartition, NavigableMap<Long, String>> allIds;
        private NavigableMap<Long, String> ids;

        Partition(
                String topic,
                int partition,
                Map<TopicPartition, List<Entry>> byPartition,
                Map<TopicPartition, NavigableMap<Long, String>> allIds) {
            this.topic = topic;
            this.partition = partition;
            this.tp = new TopicPartition(topic, partition);
            this.entries = byPartition.computeIfAbsent(tp, k -> new ArrayList<>());
            this.allIds = allIds;
            this.source = "kafka:" + topic + "/" + partition + "@";
        }

        /** The partition's event ids by offset, made when it has its first. */
        NavigableMap<Long, String> ids() {
            if (ids == null) {
                ids = allIds.computeIfAbsent(tp, k -> new TreeMap<>());
            }
            return ids;
        }
    }

    private static boolean onPartition(List<Position> positions, TopicPartition tp) {
        for (Position p : positions) {
            if (p.partition().equals(tp)) {
                return true;
            }
        }
        return false;
    }

    private Entry entry(ConsumerRecord<byte[], byte[]> r, Partition at, Map<String, List<Position>> positions) {
        TopicPartition tp = at.tp;
        Map<String, String> headers = null;
        String id;
        if (idHeader != null) {
            // The headers' texts hold the id's: the last header of that name, empty as absent (as HeaderEventId).
            headers = headers(r);
            id = headers.get(idHeader);
            id = id == null || id.isEmpty() ? null : id;
        } else {
            try {
                id = settings.eventIdExtractor().eventId(r);
            } catch (RuntimeException ex) {
                return new Entry(tp, r, null, "the event id extractor failed: " + ex, false);
            }
        }
        if (id == null) {
            return new Entry(tp, r, null, "the record carries no event id", false);
        }
        int attempt = verdicts.attempt(tp, r.offset());
        List<Position> seen = positions.get(id);
        boolean copy = seen != null && !seen.get(0).partition().equals(tp);
        try {
            Delivery d = new Delivery(
                    id,
                    r.topic(),
                    r.value(),
                    headers != null ? headers : headers(r),
                    attempt,
                    attempt > 1,
                    at.source + r.offset());
            return new Entry(tp, r, d, null, copy);
        } catch (InvalidDeliveryException ex) {
            return new Entry(tp, r, null, ex.getMessage(), false);
        }
    }

    /** Sends a dead letter and waits for the broker's answer; false when it was not written. */
    private boolean deadLetter(Entry e, String reason) {
        ConsumerRecord<byte[], byte[]> r = e.record;
        RecordHeaders headers = new RecordHeaders(r.headers().toArray());
        headers.add(DLT_REASON, utf8(reason));
        headers.add(DLT_TOPIC, utf8(r.topic()));
        headers.add(DLT_PARTITION, utf8(Integer.toString(r.partition())));
        headers.add(DLT_OFFSET, utf8(Long.toString(r.offset())));
        headers.add(DLT_CONSUMER, utf8(settings.idempotentConsumer().consumer()));
        try {
            deadLetters
                    .send(new ProducerRecord<>(settings.deadLetterTopic(), null, r.key(), r.value(), headers))
                    .get(DEAD_LETTER_SEND_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException | TimeoutException | KafkaException ex) {
            log.warn(
                    "{}: could not dead-letter {} to {}; it is tried again: {}",
                    name,
                    e.where(),
                    settings.deadLetterTopic(),
                    ex.toString());
            return false;
        }
        log.warn("{}: dead-lettered {} to {}: {}", name, e.where(), settings.deadLetterTopic(), reason);
        return true;
    }

    // A record mostly has one header (the event id): Map.of holds it without a hash table, and
    // Delivery keeps an immutable map as it is instead of copying it.
    private static Map<String, String> headers(ConsumerRecord<byte[], byte[]> r) {
        Header[] all = r.headers().toArray();
        if (all.length == 0) {
            return Map.of();
        }
        if (all.length == 1) {
            return Map.of(all[0].key(), text(all[0]));
        }
        Map<String, String> m = new HashMap<>();
        for (Header h : all) {
            m.put(h.key(), text(h)); // a repeated key: the last one
        }
        return m;
    }

    private static String text(Header h) {
        return h.value() == null ? "" : new String(h.value(), StandardCharsets.UTF_8);
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
