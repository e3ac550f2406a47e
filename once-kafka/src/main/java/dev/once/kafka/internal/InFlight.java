package dev.once.kafka.internal;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.common.TopicPartition;

/**
 * A batch a {@link PollLoop} handed to its worker thread: its result to come, where each of its
 * partitions starts (to replay it from there if it is abandoned), and whether a rebalance abandoned
 * it. Poll thread only. Not API.
 */
final class InFlight {
    final Future<BatchRun.Result> result;
    /** First offset of each partition in the batch: where to replay from if it is abandoned. */
    final Map<TopicPartition, Long> firstOffsets;

    boolean abandoned;

    InFlight(Future<BatchRun.Result> result, Map<TopicPartition, Long> firstOffsets) {
        this.result = result;
        this.firstOffsets = firstOffsets;
    }

    /** Waits up to {@code timeout} for the batch to end; true when it has, however it ended. */
    boolean await(Duration timeout) throws InterruptedException {
        try {
            result.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            return true;
        }
    }
}
