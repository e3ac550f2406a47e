package dev.once.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.kafka.internal.OrderGuard.Position;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The order in which a guarded batch handler meets a call's events (no I/O). The runner lists a poll
 * partition by partition, and the engine keeps each event's first occurrence; an event on two
 * partitions may then be listed ahead of a record that precedes it on the other one. Generated polls:
 * events in one true order, each partition holding some of them in that order (so an order keeping
 * every partition's exists), an event on several partitions now and then.
 */
class BatchCallOrderPropertyTest {

    /** Each partition's events, as indices into the true order (increasing within a partition). */
    @Provide
    Arbitrary<List<List<Integer>>> polls() {
        Arbitrary<List<Integer>> partition = Arbitraries.integers()
                .between(0, 11)
                .set()
                .ofMaxSize(8)
                .map(s -> s.stream().sorted().toList());
        return partition.list().ofMinSize(1).ofMaxSize(4);
    }

    @Property(tries = 1000)
    void theHandlerMeetsEveryPartitionsRecordsInTheirOrder(@ForAll("polls") List<List<Integer>> partitions) {
        Map<TopicPartition, NavigableMap<Long, String>> records = new LinkedHashMap<>();
        Map<String, List<Position>> positions = new HashMap<>();
        Set<String> listed = new LinkedHashSet<>(); // the engine's first occurrences, in poll order
        for (int p = 0; p < partitions.size(); p++) {
            TopicPartition tp = new TopicPartition("t", p);
            NavigableMap<Long, String> byOffset = new TreeMap<>();
            long offset = 10L * p;
            for (int event : partitions.get(p)) {
                String id = "e" + event;
                byOffset.put(offset, id);
                positions.computeIfAbsent(id, k -> new ArrayList<>()).add(new Position(tp, offset));
                listed.add(id);
                offset++;
            }
            records.put(tp, byOffset);
        }
        List<Delivery> claimed = listed.stream().map(id -> Delivery.of(id, "")).toList();
        List<String> got = OrderGuard.inPartitionOrder(positions, records, claimed).stream()
                .map(Delivery::eventId)
                .toList();

        assertThat(got).containsExactlyInAnyOrderElementsOf(listed);
        for (NavigableMap<Long, String> partition : records.values()) {
            List<Integer> at = partition.values().stream().map(got::indexOf).toList();
            assertThat(at).as("partition %s met in %s", partition.values(), got).isSorted();
        }
    }

    @Property(tries = 200)
    void aPollWithNoEventOnTwoPartitionsKeepsItsList(@ForAll @IntRange(min = 1, max = 30) int n) {
        Map<TopicPartition, NavigableMap<Long, String>> records = new HashMap<>();
        Map<String, List<Position>> positions = new HashMap<>();
        List<Delivery> claimed = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            TopicPartition tp = new TopicPartition("t", i % 3);
            String id = "e" + i;
            records.computeIfAbsent(tp, k -> new TreeMap<>()).put((long) i, id);
            positions.put(id, List.of(new Position(tp, i)));
            claimed.add(Delivery.of(id, ""));
        }
        assertThat(OrderGuard.inPartitionOrder(positions, records, claimed)).isSameAs(claimed);
    }

    @Test
    void twoPartitionsInOppositeOrdersKeepTheList() {
        TopicPartition p0 = new TopicPartition("t", 0);
        TopicPartition p1 = new TopicPartition("t", 1);
        Map<TopicPartition, NavigableMap<Long, String>> records = Map.of(
                p0, new TreeMap<>(Map.of(0L, "x", 1L, "y", 2L, "z")),
                p1, new TreeMap<>(Map.of(0L, "y", 1L, "x")));
        Map<String, List<Position>> positions = Map.of(
                "x", List.of(new Position(p0, 0), new Position(p1, 1)),
                "y", List.of(new Position(p0, 1), new Position(p1, 0)),
                "z", List.of(new Position(p0, 2)));
        List<Delivery> claimed = List.of(Delivery.of("x", ""), Delivery.of("y", ""), Delivery.of("z", ""));
        assertThat(OrderGuard.inPartitionOrder(positions, records, claimed).stream()
                        .map(Delivery::eventId))
                .containsExactly("x", "y", "z");
    }
}
