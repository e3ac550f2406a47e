package dev.once.cli.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The SQS redelivery horizon from AWS's documented retention rules (ElasticMQ reports no retention to test them on). */
class SqsHorizonTest {

    private static final Duration FOUR_DAYS = Duration.ofDays(4);
    private static final Duration FOURTEEN_DAYS = Duration.ofDays(14);

    @Test
    void withoutADeadLetterQueueTheHorizonIsTheQueuesRetention() {
        assertThat(SqsHorizon.horizon(FOUR_DAYS, false, null)).isEqualTo(FOUR_DAYS);
    }

    @Test
    void aStandardDeadLetterQueueCountsFromTheOriginalEnqueueTimeAndARedriveStartsAgain() {
        assertThat(SqsHorizon.horizon(FOUR_DAYS, false, FOURTEEN_DAYS)).isEqualTo(Duration.ofDays(18));
        assertThat(SqsHorizon.horizon(FOURTEEN_DAYS, false, FOUR_DAYS))
                .as("a message older than the dead-letter queue's retention is gone when it is moved")
                .isEqualTo(Duration.ofDays(18));
    }

    @Test
    void aFifoDeadLetterQueueCountsFromTheMove() {
        assertThat(SqsHorizon.horizon(FOUR_DAYS, true, FOURTEEN_DAYS)).isEqualTo(Duration.ofDays(22));
    }
}
