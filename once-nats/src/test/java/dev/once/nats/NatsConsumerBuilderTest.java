package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The builder's checks and their messages, pinned: they now go through the shared ConsumerSettings. */
class NatsConsumerBuilderTest {

    @Test
    void eventIdNameMustNotBeBlankOrNull() {
        assertThatThrownBy(() -> NatsConsumer.builder().eventIdHeader(" "))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdHeader must not be blank");
        assertThatThrownBy(() -> NatsConsumer.builder().eventIdHeader(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("eventIdHeader");
    }

    @Test
    void receiveRetriesMustNotBeNull() {
        assertThatThrownBy(() -> NatsConsumer.builder().receiveRetries(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("policy");
    }

    @Test
    void aCountOutsideItsRangeIsNamed() {
        assertThatThrownBy(() -> NatsConsumer.builder().batchSize(10_001))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("batchSize must be between 1 and 10000, but was 10001");
    }

    @Test
    void aWaitThatIsNotPositiveIsNamed() {
        assertThatThrownBy(() -> NatsConsumer.builder().ackWait(Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("ackWait must be positive, but was PT0S");
        assertThatThrownBy(() -> NatsConsumer.builder().fetchWait(Duration.ofSeconds(-1)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("fetchWait must be positive, but was PT-1S");
    }
}
