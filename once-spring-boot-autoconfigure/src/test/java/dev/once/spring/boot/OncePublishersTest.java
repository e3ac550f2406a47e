package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;

/** The starter's routing publisher keeps the relay's batches concurrent (no I/O: recording publishers). */
class OncePublishersTest {

    /** Records each {@code publishAll} call it gets; answers each message with a receipt naming it. */
    private static final class Recording implements Publisher {
        final List<List<String>> calls = new ArrayList<>();

        @Override
        public Receipt publish(OutboxMessage message) {
            throw new AssertionError("a routed batch must reach publishAll, not publish, for " + message.eventId());
        }

        @Override
        public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
            calls.add(messages.stream().map(OutboxMessage::eventId).toList());
            return messages.stream()
                    .map(m ->
                            (CompletionStage<Receipt>) CompletableFuture.completedFuture(new Receipt(200, m.eventId())))
                    .toList();
        }
    }

    @Test
    void eachTargetGetsItsShareOfABatchInOneCallAndTheStagesKeepTheBatchOrder() {
        Recording kafka = new Recording();
        Recording nats = new Recording();
        Publisher routing = OncePublishers.routing(List.of(
                new OncePublishers.BrokerPublisher("kafka", d -> d.startsWith("orders"), kafka),
                new OncePublishers.BrokerPublisher("nats", d -> d.startsWith("audit"), nats)));

        List<CompletionStage<Receipt>> stages = routing.publishAll(List.of(
                message("e1", "orders"), message("e2", "audit"), message("e3", "nowhere"), message("e4", "orders")));

        assertThat(kafka.calls).containsExactly(List.of("e1", "e4"));
        assertThat(nats.calls).containsExactly(List.of("e2"));
        assertThat(stages).hasSize(4);
        assertThat(stages.get(0).toCompletableFuture().join().body()).isEqualTo("e1");
        assertThat(stages.get(1).toCompletableFuture().join().body()).isEqualTo("e2");
        assertThat(stages.get(3).toCompletableFuture().join().body()).isEqualTo("e4");
        assertThat(stages.get(2).toCompletableFuture())
                .failsWithin(java.time.Duration.ZERO)
                .withThrowableOfType(java.util.concurrent.ExecutionException.class)
                .havingCause()
                .isInstanceOfSatisfying(PublishFailure.class, f -> {
                    assertThat(f.retryable()).as("no publisher ever takes it").isFalse();
                    assertThat(f.getMessage()).contains("'nowhere'", "[kafka, nats]");
                });
    }

    @Test
    void aTargetWhosePublishAllThrowsFailsItsOwnShareAndNoOtherTargetsMessages() {
        Recording kafka = new Recording();
        IllegalStateException closed = new IllegalStateException("producer closed");
        Publisher broken = new Publisher() {
            @Override
            public Receipt publish(OutboxMessage message) {
                throw closed;
            }

            @Override
            public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                throw closed;
            }
        };
        Publisher routing = OncePublishers.routing(List.of(
                new OncePublishers.BrokerPublisher("nats", d -> d.startsWith("audit"), broken),
                new OncePublishers.BrokerPublisher("kafka", d -> d.startsWith("orders"), kafka)));

        List<CompletionStage<Receipt>> stages =
                routing.publishAll(List.of(message("e1", "audit"), message("e2", "orders"), message("e3", "audit")));

        assertThat(kafka.calls).as("the other target still gets its share").containsExactly(List.of("e2"));
        assertThat(stages).hasSize(3);
        assertThat(stages.get(1).toCompletableFuture().join().body()).isEqualTo("e2");
        for (int i : new int[] {0, 2}) {
            assertThat(stages.get(i).toCompletableFuture())
                    .as("message %d, of the target that threw", i)
                    .failsWithin(java.time.Duration.ZERO)
                    .withThrowableOfType(java.util.concurrent.ExecutionException.class)
                    .havingCause()
                    .isSameAs(closed);
        }
    }

    private static OutboxMessage message(String eventId, String destination) {
        return new OutboxMessage(
                1, eventId, destination, "k-" + eventId, new byte[0], Map.of(), eventId, 1, Instant.EPOCH);
    }
}
