package dev.once;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RetryPolicyTest {

    private static RetryPolicy.Builder base() {
        return RetryPolicy.builder()
                .initialDelay(Duration.ofMillis(100))
                .maxDelay(Duration.ofSeconds(1))
                .seed(42);
    }

    @Test
    void withoutJitterTheDelayDoublesUpToTheCap() {
        RetryPolicy p = base().jitter(RetryPolicy.Jitter.NONE).build();
        assertThat(p.delay(1)).isEqualTo(Duration.ofMillis(100));
        assertThat(p.delay(2)).isEqualTo(Duration.ofMillis(200));
        assertThat(p.delay(4)).isEqualTo(Duration.ofMillis(800));
        assertThat(p.delay(5)).as("capped").isEqualTo(Duration.ofSeconds(1));
        assertThat(p.delay(10_000)).as("no overflow far past the cap").isEqualTo(Duration.ofSeconds(1));
    }

    @Test
    void fullJitterSpreadsBetweenZeroAndTheComputedDelay() {
        RetryPolicy p = base().jitter(RetryPolicy.Jitter.FULL).build();
        Set<Duration> seen = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            Duration d = p.delay(3);
            assertThat(d).isBetween(Duration.ZERO, Duration.ofMillis(400));
            seen.add(d);
        }
        assertThat(seen).as("failures of one moment do not retry together").hasSizeGreaterThan(100);
    }

    @Test
    void equalJitterNeverWaitsLessThanHalf() {
        RetryPolicy p = base().jitter(RetryPolicy.Jitter.EQUAL).build();
        for (int i = 0; i < 200; i++) {
            assertThat(p.delay(3)).isBetween(Duration.ofMillis(200), Duration.ofMillis(400));
        }
    }

    @Test
    void aSeedMakesTheDelaysRepeatable() {
        RetryPolicy a = base().seed(7).build();
        RetryPolicy b = base().seed(7).build();
        for (int retry = 1; retry < 20; retry++) {
            assertThat(a.delay(retry)).isEqualTo(b.delay(retry));
        }
    }

    @Test
    void retriesAreCountedFromOneUpToTheLimit() {
        RetryPolicy p = base().maxRetries(3).build();
        assertThat(p.allowsRetry(0)).isFalse();
        assertThat(p.allowsRetry(1)).isTrue();
        assertThat(p.allowsRetry(3)).isTrue();
        assertThat(p.allowsRetry(4)).isFalse();
        assertThat(base().maxRetries(0).build().allowsRetry(1)).isFalse();
        assertThatThrownBy(() -> p.delay(0)).hasMessageContaining("counted from 1");
    }

    @Test
    void theBuilderRefusesValuesThatCannotWork() {
        assertThatThrownBy(() -> RetryPolicy.builder().initialDelay(Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("initialDelay")
                .hasMessageContaining("PT0S");
        assertThatThrownBy(() -> RetryPolicy.builder().maxDelay(Duration.ofDays(2)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("maxDelay");
        assertThatThrownBy(() -> RetryPolicy.builder().multiplier(0.5))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("0.5");
        assertThatThrownBy(() -> RetryPolicy.builder().multiplier(Double.NaN))
                .isInstanceOf(InvalidConfigurationException.class);
        assertThatThrownBy(() -> RetryPolicy.builder().maxRetries(-1))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("-1");
        assertThatThrownBy(() -> RetryPolicy.builder()
                        .initialDelay(Duration.ofSeconds(5))
                        .maxDelay(Duration.ofSeconds(1))
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("at least initialDelay");
    }

    @Test
    void aChangedCopyLeavesTheOriginalAlone() {
        RetryPolicy p = base().maxRetries(3).build();
        RetryPolicy q = p.toBuilder().maxRetries(9).build();
        assertThat(p.maxRetries()).isEqualTo(3);
        assertThat(q.maxRetries()).isEqualTo(9);
        assertThat(q.initialDelay()).isEqualTo(p.initialDelay());
    }
}
