package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.jdbc.Dialects;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

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

    /**
     * A key's order needs each message settled before its ack deadline lapses: past a lease, each lapse is a
     * delivery attempt, and once the subscription's dead-letter policy has forwarded the message Pub/Sub hands
     * the key's next message to another subscriber while this one still works on it (docs/pubsub.md, "Ordering
     * keys and the lease"). Ordered mode extends for as long as the work runs, so a lease is refused.
     */
    @Test
    void orderedByKeyWithALeaseIsRefused() {
        PubSubConsumer.Builder ordered = PubSubConsumer.builder()
                .subscription("p", "orders")
                .consumer(IdempotentConsumer.builder()
                        .dataSource(new PGSimpleDataSource()) // not connected: the dialect is given
                        .dialect(Dialects.POSTGRESQL)
                        .consumer("c")
                        .handler((d, tx) -> {})
                        .build())
                .lease(Duration.ofMinutes(5))
                .orderedByKey();
        assertThatThrownBy(ordered::build)
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageStartingWith("lease(PT5M) with orderedByKey() on projects/p/subscriptions/orders: a key's"
                        + " order holds only while each message is settled before its ack deadline lapses")
                .hasMessageEndingWith(
                        "orderedByKey() extends the deadline for as long as the work runs: drop lease(…)");
    }
}
