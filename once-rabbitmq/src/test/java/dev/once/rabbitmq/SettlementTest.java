package dev.once.rabbitmq;

import static dev.once.adapter.Verdict.ACKNOWLEDGE;
import static dev.once.adapter.Verdict.REDELIVER;
import static dev.once.rabbitmq.Settlement.Kind.ACK;
import static dev.once.rabbitmq.Settlement.Kind.ACK_MULTIPLE;
import static dev.once.rabbitmq.Settlement.Kind.DEAD_LETTER;
import static dev.once.rabbitmq.Settlement.Kind.REQUEUE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.adapter.Verdict;
import java.util.List;
import org.junit.jupiter.api.Test;

class SettlementTest {

    @Test
    void contiguousSuccessesAreAckedWithOneMultipleAckWhileNothingIsHeldBelowThem() {
        List<Verdict> verdicts = List.of(ACKNOWLEDGE, ACKNOWLEDGE, ACKNOWLEDGE, Verdict.DEAD_LETTER, ACKNOWLEDGE);
        assertThat(Settlement.plan(List.of(11L, 12L, 13L, 14L, 15L), verdicts, Long.MAX_VALUE))
                .containsExactly(
                        new Settlement(ACK_MULTIPLE, 13), new Settlement(DEAD_LETTER, 14), new Settlement(ACK, 15));
    }

    @Test
    void aMessageHeldForADelayedRequeueIsNeverCoveredByAMultipleAck() {
        List<Verdict> verdicts = List.of(ACKNOWLEDGE, ACKNOWLEDGE, REDELIVER, ACKNOWLEDGE, ACKNOWLEDGE);
        assertThat(Settlement.plan(List.of(11L, 12L, 13L, 14L, 15L), verdicts, Long.MAX_VALUE))
                .containsExactly(
                        new Settlement(ACK_MULTIPLE, 12),
                        new Settlement(REQUEUE, 13),
                        new Settlement(ACK, 14),
                        new Settlement(ACK, 15));
        assertThat(Settlement.plan(List.of(21L, 22L), List.of(ACKNOWLEDGE, ACKNOWLEDGE), 7L))
                .as("tag 7 of an earlier batch is still held")
                .containsExactly(new Settlement(ACK, 21), new Settlement(ACK, 22));
    }
}
