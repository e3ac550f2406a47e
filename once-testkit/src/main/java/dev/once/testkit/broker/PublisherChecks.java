package dev.once.testkit.broker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;

/**
 * Checks a broker adapter's publisher failure test makes against the failure contract of
 * {@link Publisher}, the same for every broker. Real PostgreSQL, a fresh database per check.
 */
public final class PublisherChecks {

    private PublisherChecks() {}

    /**
     * A row to {@code destination}, which the broker refuses for good, goes to {@code dead} after
     * one attempt of the real relay, with {@code responseStatus} recorded when it is not null.
     */
    public static void relayMovesARefusedRowToDead(Publisher publisher, String destination, Integer responseStatus) {
        relayMovesARefusedRowToDead(publisher, destination, new byte[] {'1'}, responseStatus);
    }

    /** As above, for a row refused for its {@code payload} (a record too large for the destination). */
    public static void relayMovesARefusedRowToDead(
            Publisher publisher, String destination, byte[] payload, Integer responseStatus) {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> tx.outbox().add(destination, null, payload, Map.of(), null))
                    .build()
                    .process(Delivery.builder("order-1").build());
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .publisher(publisher)
                    .meterRegistry(new SimpleMeterRegistry())
                    .build();
            assertThat(relay.relayOnce()).isEqualTo(1);
            String status = responseStatus == null ? "" : " AND response_status = " + responseStatus;
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'dead' AND attempts = 1" + status))
                    .as("dead after one attempt" + (responseStatus == null ? "" : ", status " + responseStatus))
                    .isEqualTo(1);
        }
    }

    /** Every stage of a batch failed with a retryable {@link PublishFailure} (the broker could not be reached). */
    public static void eachRetryable(List<CompletionStage<Receipt>> stages, int size) {
        assertThat(stages)
                .hasSize(size)
                .allSatisfy(stage -> assertThatThrownBy(
                                () -> stage.toCompletableFuture().join())
                        .isInstanceOf(CompletionException.class)
                        .cause()
                        .isInstanceOfSatisfying(
                                PublishFailure.class,
                                f -> assertThat(f.retryable()).isTrue()));
    }
}
