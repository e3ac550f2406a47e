package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import org.junit.jupiter.api.Test;

/** The builder's checks and their messages, pinned: they now go through the shared ConsumerSettings. */
class RabbitConsumerBuilderTest {

    @Test
    void eventIdNameMustNotBeBlankOrNull() {
        assertThatThrownBy(() -> RabbitConsumer.builder().eventIdHeader(" "))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdHeader must not be blank");
        assertThatThrownBy(() -> RabbitConsumer.builder().eventIdHeader(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("eventIdHeader");
    }

    @Test
    void receiveRetriesMustNotBeNull() {
        assertThatThrownBy(() -> RabbitConsumer.builder().receiveRetries(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("policy");
    }

    @Test
    void aCountOutsideItsRangeIsNamed() {
        assertThatThrownBy(() -> RabbitConsumer.builder().prefetch(65_536))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("prefetch must be between 1 and 65535, but was 65536");
    }
}
