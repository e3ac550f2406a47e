package dev.once.adapter;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.RetryPolicy;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ConsumerSettingsTest {

    private final ConsumerSettings defaults = ConsumerSettings.defaults("eventIdAttribute", "once-event-id");

    @Test
    void defaultsAreTheDriversAndHeartbeatOn() {
        assertThat(defaults.eventId()).isEqualTo("once-event-id");
        assertThat(defaults.receiveRetries()).isSameAs(AdapterDriver.DEFAULT_RECEIVE_RETRIES);
        assertThat(defaults.heartbeat()).isTrue();
    }

    @Test
    void aBlankOrNullEventIdIsRefusedUnderTheAdaptersOwnName() {
        assertThatThrownBy(() -> defaults.withEventId("  "))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdAttribute must not be blank");
        assertThatThrownBy(() -> defaults.withEventId(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("eventIdAttribute");
        assertThatThrownBy(() -> ConsumerSettings.defaults("eventIdHeader", ""))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdHeader must not be blank");
        assertThatThrownBy(() -> defaults.withReceiveRetries(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("policy");
    }

    @Test
    void withersReturnANewValueAndLeaveTheOldOneAlone() {
        RetryPolicy policy = RetryPolicy.builder().maxRetries(3).build();
        ConsumerSettings changed =
                defaults.withEventId("msg-id").withReceiveRetries(policy).withHeartbeat(false);

        assertThat(changed.eventId()).isEqualTo("msg-id");
        assertThat(changed.receiveRetries()).isSameAs(policy);
        assertThat(changed.heartbeat()).isFalse();
        assertThat(defaults.eventId()).isEqualTo("once-event-id");
        assertThat(defaults.heartbeat()).isTrue();
    }

    @Test
    void aValueOutsideItsRangeIsNamedWithTheRange() {
        assertThat(ConsumerSettings.between("threads", 64, 1, 64)).isEqualTo(64);
        assertThatThrownBy(() -> ConsumerSettings.between("threads", 65, 1, 64))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("threads must be between 1 and 64, but was 65");
        assertThatThrownBy(() -> ConsumerSettings.between("prefetch", 0, 1, 65_535))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("prefetch must be between 1 and 65535, but was 0");
    }

    @Test
    void aDurationThatIsNotPositiveIsNamed() {
        assertThat(ConsumerSettings.positive("lease", Duration.ofMillis(1))).isEqualTo(Duration.ofMillis(1));
        assertThatThrownBy(() -> ConsumerSettings.positive("ackWait", Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("ackWait must be positive, but was PT0S");
        assertThatThrownBy(() -> ConsumerSettings.positive("fetchWait", Duration.ofSeconds(-1)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("fetchWait must be positive, but was PT-1S");
        assertThatThrownBy(() -> ConsumerSettings.positive("lease", null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("lease");
    }
}
