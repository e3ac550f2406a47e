package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.testsupport.OwnThreads;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * Another process's delivery of an event, for the tests of a listener call that meets a claim it does not hold: a plain
 * {@link IdempotentConsumer} of the listener's consumer on the same database, whose transaction claims the event and
 * stays open until {@link #end} says how it ends.
 */
final class OtherProcessClaim {

    private final CountDownLatch holding = new CountDownLatch(1);
    private final CompletableFuture<Boolean> commits = new CompletableFuture<>();
    private final CompletableFuture<Outcome> outcome;

    /** Claims {@code eventId} for {@code consumer} on {@code ds}: returns once the claim is taken. */
    OtherProcessClaim(DataSource ds, String consumer, String eventId) throws InterruptedException {
        IdempotentConsumer other = IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer(consumer)
                .handler((d, tx) -> {
                    holding.countDown();
                    if (!commits.get(2, TimeUnit.MINUTES)) {
                        throw new IllegalStateException("the holder of " + d.eventId() + " rolls back");
                    }
                })
                .build();
        outcome = CompletableFuture.supplyAsync(
                () -> other.process(Delivery.builder(eventId).build()), OwnThreads.each());
        assertThat(holding.await(30, TimeUnit.SECONDS))
                .as("the holder claimed " + eventId)
                .isTrue();
    }

    /** Ends the holder's transaction: a commit (the event is applied there) or a rollback; its outcome. */
    Outcome end(boolean commit) {
        commits.complete(commit);
        return outcome.join();
    }
}
