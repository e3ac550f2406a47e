package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.jdbc.Dialects;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;

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

    /** FIFO order needs each message settled within its visibility timeout (SqsFifoTest shows what breaks). */
    @Test
    void aFifoQueueWithoutTheHeartbeatIsRefused() {
        try (SqsClient client = SqsClient.builder().region(Region.US_EAST_1).build()) {
            SqsConsumer.Builder fifo = SqsConsumer.builder()
                    .client(client)
                    .queueUrl("https://sqs.us-east-1.amazonaws.com/1/orders.fifo")
                    .consumer(IdempotentConsumer.builder()
                            .dataSource(new PGSimpleDataSource()) // not connected: the dialect is given
                            .dialect(Dialects.POSTGRESQL)
                            .consumer("c")
                            .handler((d, tx) -> {})
                            .build())
                    .heartbeat(false);
            assertThatThrownBy(fifo::build)
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageStartingWith(
                            "heartbeat(false) on the FIFO queue https://sqs.us-east-1.amazonaws.com/1/orders.fifo:")
                    .hasMessageEndingWith("keep heartbeat(true), the default");
        }
    }

    @Test
    void aCountOutsideItsRangeIsNamed() {
        assertThatThrownBy(() -> SqsConsumer.builder().concurrency(101))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessage("concurrency must be between 1 and 100, but was 101");
    }
}
