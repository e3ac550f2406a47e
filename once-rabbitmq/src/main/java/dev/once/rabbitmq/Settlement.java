package dev.once.rabbitmq;

import dev.once.Outcome;
import dev.once.Outcome.Status;
import java.util.ArrayList;
import java.util.List;

/**
 * How a processed batch is settled on its channel: one {@code basicAck(tag, multiple=true)} per
 * run of consecutive acknowledged deliveries, a {@code basicNack(requeue=true)} per retryable one
 * and a {@code basicReject(requeue=false)} (dead-letter) per permanent one, in delivery-tag order.
 * A multiple ack acknowledges every outstanding tag up to its own; it is safe because everything
 * before the run has been settled already and everything delivered after the batch has a
 * higher tag.
 *
 * @param kind what to send
 * @param tag  the delivery tag (the last of the run for a multiple ack)
 */
record Settlement(Kind kind, long tag) {

    enum Kind {
        ACK_MULTIPLE,
        ACK,
        REQUEUE,
        DEAD_LETTER
    }

    /** @param tags ascending delivery tags of one batch; {@code outcomes} in the same order */
    static List<Settlement> plan(List<Long> tags, List<Outcome> outcomes) {
        List<Settlement> plan = new ArrayList<>();
        int i = 0;
        while (i < tags.size()) {
            Outcome o = outcomes.get(i);
            if (o.shouldAcknowledge()) {
                int end = i;
                while (end + 1 < tags.size() && outcomes.get(end + 1).shouldAcknowledge()) {
                    end++;
                }
                plan.add(new Settlement(end > i ? Kind.ACK_MULTIPLE : Kind.ACK, tags.get(end)));
                i = end + 1;
            } else {
                plan.add(new Settlement(
                        o.status() == Status.FAILED_PERMANENT ? Kind.DEAD_LETTER : Kind.REQUEUE, tags.get(i)));
                i++;
            }
        }
        return plan;
    }
}
