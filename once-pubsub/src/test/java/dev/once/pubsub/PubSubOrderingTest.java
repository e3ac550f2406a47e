package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Ordering keys: rows of three keys published through {@link PubSubPublisher} (ordering key = row
 * key) to a subscription with message ordering, one message of each key failing (retryable) the
 * first time it is handled: with {@link PubSubConsumer.Builder#orderedByKey()} every key's effects
 * come in publish order.
 *
 * <p>What this does not reach: the emulator hands out a key's next message only once the one before
 * it is settled (the same run without {@code orderedByKey()} kept the order too), so the consumer's
 * hold-back of successors already received never has work to do here. Pub/Sub proper hands out
 * several messages of a key at once; {@link PubSubDeliverySequenceTest} plays that sequence.
 */
class PubSubOrderingTest extends FreshSubscription {
    private static final int PER_KEY = 8;
    private static final List<String> KEYS = List.of("k1", "k2", "k3");

    PubSubOrderingTest() {
        super("order", s -> s.setEnableMessageOrdering(true));
    }

    @Test
    void oneKeysEffectsFollowPublishOrderAlsoAfterAFailure() throws Exception {
        Map<String, List<String>> applied = run(true);
        for (String key : KEYS) {
            assertThat(applied.get(key))
                    .as("effects of key %s in commit order", key)
                    .containsExactlyElementsOf(expected(key));
        }
    }

    private Map<String, List<String>> run(boolean ordered) throws Exception {
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        Recorder recorder = new Recorder(db, d -> {
            // the third message of each key fails the first time: nothing of its key may overtake it
            if (d.eventId().endsWith("-2") && failedOnce.add(d.eventId())) {
                throw new RetryableException("first attempt of " + d.eventId() + " fails on purpose");
            }
        });
        List<OutboxMessage> rows = new ArrayList<>();
        for (int i = 0; i < PER_KEY; i++) {
            for (String key : KEYS) {
                rows.add(OutboxRows.row(topic.getTopic(), key + "-" + i, key, key + "-" + i));
            }
        }
        try (PubSubPublisher p = TestPubSub.outboxPublisher()) {
            // the relay's way: one row per key per wave, the next wave after the last one is sent
            for (int from = 0; from < rows.size(); from += KEYS.size()) {
                for (CompletionStage<?> sent : p.publishAll(rows.subList(from, from + KEYS.size()))) {
                    sent.toCompletableFuture().get(1, TimeUnit.MINUTES);
                }
            }
        }
        PubSubConsumer.Builder b =
                TestPubSub.consumer(subscription, recorder, null).batchSize(rows.size());
        if (ordered) {
            b.orderedByKey();
        }
        try (PubSubConsumer c = b.build().start()) {
            await().atMost(Duration.ofMinutes(2))
                    .until(() -> db.queryLong("SELECT count(DISTINCT event_id) FROM effect") == rows.size());
        }
        assertThat(failedOnce).as("one message of each key failed once").hasSize(KEYS.size());
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("every effect applied exactly once")
                .isEqualTo(rows.size());
        Map<String, List<String>> applied = new LinkedHashMap<>();
        KEYS.forEach(k -> applied.put(k, new ArrayList<>()));
        try (Connection c = db.dataSource().getConnection();
                ResultSet rs = c.createStatement().executeQuery("SELECT event_id FROM effect ORDER BY seq")) {
            while (rs.next()) {
                applied.get(rs.getString(1).substring(0, 2)).add(rs.getString(1));
            }
        }
        return applied;
    }

    private static List<String> expected(String key) {
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < PER_KEY; i++) {
            ids.add(key + "-" + i);
        }
        return ids;
    }
}
