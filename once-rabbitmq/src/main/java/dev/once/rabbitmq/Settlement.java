package dev.once.rabbitmq;

import dev.once.adapter.Verdict;
import java.util.ArrayList;
import java.util.List;

/**
 * How a processed batch is settled on its channel, in delivery-tag order: a
 * {@code basicAck(tag, multiple=true)} per run of consecutive acknowledged deliveries, a
 * {@code basicReject(requeue=false)} (dead-letter) per message to dead-letter, and a
 * {@link Kind#REQUEUE} per retryable one, which the consumer holds unacknowledged for its retry
 * delay before it sends {@code basicNack(requeue=true)}. A multiple ack acknowledges every
 * outstanding tag up to its own, so it is used only when no held message has a lower tag; a run
 * with one below it is acknowledged tag by tag.
 *
 * @param kind what to send
 * @param tag  the delivery tag (the last of the run for a multiple ack)
 */
record Settlement(Kind kind, long tag) {

    enum Kind {
        ACK_MULTIPLE,
        ACK,
        /** Hold for the retry delay, then {@code basicNack(requeue=true)}. */
        REQUEUE,
        DEAD_LETTER
    }

    /**
     * @param tags       ascending delivery tags of one batch; {@code verdicts} in the same order
     * @param lowestHeld the lowest tag held for a delayed requeue from earlier batches, or
     *                   {@link Long#MAX_VALUE} when none is
     */
    static List<Settlement> plan(List<Long> tags, List<Verdict> verdicts, long lowestHeld) {
        List<Settlement> plan = new ArrayList<>();
        long held = lowestHeld;
        int i = 0;
        while (i < tags.size()) {
            Verdict v = verdicts.get(i);
            if (v == Verdict.ACKNOWLEDGE) {
                int end = i;
                while (end + 1 < tags.size() && verdicts.get(end + 1) == Verdict.ACKNOWLEDGE) {
                    end++;
                }
                if (end > i && held > tags.get(end)) {
                    plan.add(new Settlement(Kind.ACK_MULTIPLE, tags.get(end)));
                } else {
                    for (int k = i; k <= end; k++) {
                        plan.add(new Settlement(Kind.ACK, tags.get(k)));
                    }
                }
                i = end + 1;
            } else {
                if (v == Verdict.REDELIVER) {
                    held = Math.min(held, tags.get(i));
                }
                plan.add(new Settlement(v == Verdict.DEAD_LETTER ? Kind.DEAD_LETTER : Kind.REQUEUE, tags.get(i)));
                i++;
            }
        }
        return plan;
    }
}
