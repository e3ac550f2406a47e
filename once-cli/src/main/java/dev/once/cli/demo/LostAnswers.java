package dev.once.cli.demo;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The relay's side of the crash button: for a chosen idempotency key, the provider's answer is
 * lost once after the provider has charged, as when a relay dies between the send and marking the
 * row sent. The relay then sends the row again, with the same key. Thread-safe.
 */
final class LostAnswers implements Publisher {

    final AtomicInteger lost = new AtomicInteger();
    private final Publisher delegate;
    private final Set<String> keys = ConcurrentHashMap.newKeySet();

    LostAnswers(Publisher delegate) {
        this.delegate = delegate;
    }

    /** The next answer for {@code idempotencyKey} is lost. */
    void loseNextAnswer(String idempotencyKey) {
        keys.add(idempotencyKey);
    }

    @Override
    public Receipt publish(OutboxMessage message) throws Exception {
        Receipt receipt = delegate.publish(message);
        if (keys.remove(message.idempotencyKey())) {
            lost.incrementAndGet();
            throw PublishFailure.retryable(
                    "the provider's answer to " + message.idempotencyKey() + " was lost after it"
                            + " charged (the relay died before marking the row sent); sending again with the same key",
                    Receipt.NONE,
                    null);
        }
        return receipt;
    }
}
