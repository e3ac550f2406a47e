package dev.once.kafka.internal;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;

/**
 * The partitions a {@link PollLoop} keeps paused after a failed record, each until its retry's
 * backoff is over: a partition backing off is not resumed with the others. Times are
 * {@link System#nanoTime()}. Poll thread only. Not API.
 */
final class Backoffs {

    private final Map<TopicPartition, Long> until = new HashMap<>();

    /** {@code tp} stays paused until {@code until}. */
    void pause(TopicPartition tp, long until) {
        this.until.put(tp, until);
    }

    /** The partitions whose backoff is over at {@code now}, no longer backing off. */
    List<TopicPartition> due(long now) {
        if (until.isEmpty()) {
            return new ArrayList<>();
        }
        List<TopicPartition> due = new ArrayList<>();
        until.forEach((tp, at) -> {
            if (now - at >= 0) {
                due.add(tp);
            }
        });
        due.forEach(until::remove);
        return due;
    }

    /** Of {@code partitions}, those not backing off. */
    Set<TopicPartition> notBackingOff(Collection<TopicPartition> partitions) {
        Set<TopicPartition> free = new HashSet<>(partitions);
        free.removeAll(until.keySet());
        return free;
    }

    /** The partitions left this loop: their next owner retries on its own clock. */
    void forget(Collection<TopicPartition> partitions) {
        partitions.forEach(until::remove);
    }
}
