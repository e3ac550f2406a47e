package dev.once.rabbitmq;

import static dev.once.rabbitmq.Settlement.Kind.ACK;
import static dev.once.rabbitmq.Settlement.Kind.ACK_MULTIPLE;
import static dev.once.rabbitmq.Settlement.Kind.DEAD_LETTER;
import static dev.once.rabbitmq.Settlement.Kind.REQUEUE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Outcome;
import dev.once.Outcome.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

class SettlementTest {

    @Test
    void contiguousSuccessesAreAckedWithOneMultipleAckAndFailuresSplitTheRuns() {
        List<Outcome> outcomes = List.of(
                o(Status.APPLIED),
                o(Status.DUPLICATE),
                o(Status.APPLIED),
                o(Status.FAILED_RETRYABLE),
                o(Status.APPLIED),
                o(Status.FAILED_PERMANENT),
                o(Status.IN_PROGRESS),
                o(Status.APPLIED),
                o(Status.DUPLICATE));
        assertThat(Settlement.plan(List.of(11L, 12L, 13L, 14L, 15L, 16L, 17L, 18L, 19L), outcomes))
                .containsExactly(
                        new Settlement(ACK_MULTIPLE, 13),
                        new Settlement(REQUEUE, 14),
                        new Settlement(ACK, 15),
                        new Settlement(DEAD_LETTER, 16),
                        new Settlement(REQUEUE, 17),
                        new Settlement(ACK_MULTIPLE, 19));
    }

    private static Outcome o(Status status) {
        return new Outcome("evt", status, null);
    }
}
