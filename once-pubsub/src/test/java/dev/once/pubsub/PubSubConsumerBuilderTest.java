package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The builder's checks and their messages, pinned: they now go through the shared ConsumerSettings. */
class PubSubConsumerBuilderTest {

    @Test
    void eventIdNameMustNotBeBlankOrNull() {
        assertThatThrownBy(() -> PubSubConsumer.builder().eventIdAttribute(" "))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdAttribute must not be blank");
        assertThatThrownBy(() -> PubSubConsumer.builder().eventIdAttribute(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("eventIdAttribute");
    }

    @Test
    void receiveRetriesMustNotBeNull() {
        assertThatThrownBy(() -> PubSubConsumer.builder().receiveRetries(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("policy");
    }

    @Test
    void aCountOutsideItsRangeIsNamed() {
        assertThatThrownBy(() -> PubSubConsumer.builder().batchSize(0))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("batchSize must be between 1 and 10000, but was 0");
    }

    @Test
    void aLeaseThatIsNotPositiveIsNamed() {
        assertThatThrownBy(() -> PubSubConsumer.builder().lease(Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("lease must be positive, but was PT0S");
        assertThatThrownBy(() -> PubSubConsumer.builder().ackDeadline(Duration.ofSeconds(-1)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("ackDeadline must be positive, but was PT-1S");
        assertThatThrownBy(() -> PubSubConsumer.builder().threads(65))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("threads must be between 1 and 64, but was 65");
    }
}
