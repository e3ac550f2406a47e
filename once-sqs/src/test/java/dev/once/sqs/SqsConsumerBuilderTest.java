package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import org.junit.jupiter.api.Test;

/** The builder's checks and their messages, pinned: they now go through the shared ConsumerSettings. */
class SqsConsumerBuilderTest {

    @Test
    void eventIdNameMustNotBeBlankOrNull() {
        assertThatThrownBy(() -> SqsConsumer.builder().eventIdAttribute(" "))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("eventIdAttribute must not be blank");
        assertThatThrownBy(() -> SqsConsumer.builder().eventIdAttribute(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("eventIdAttribute");
    }

    @Test
    void receiveRetriesMustNotBeNull() {
        assertThatThrownBy(() -> SqsConsumer.builder().receiveRetries(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("policy");
    }

    @Test
    void aCountOutsideItsRangeIsNamed() {
        assertThatThrownBy(() -> SqsConsumer.builder().concurrency(101))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("concurrency must be between 1 and 100, but was 101");
    }
}
