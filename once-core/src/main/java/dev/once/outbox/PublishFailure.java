package dev.once.outbox;

import dev.once.OnceException;
import java.util.Objects;

/**
 * A send that failed with an answer from the destination worth recording (an HTTP 503 or 422 and
 * its body). {@link #retryable()} decides what the relay does next: try again later with backoff,
 * or move the row to {@code dead} at once.
 */
public class PublishFailure extends OnceException {

    private final boolean retryable;
    private final Receipt receipt;

    public PublishFailure(String message, boolean retryable, Receipt receipt) {
        super(message);
        this.retryable = retryable;
        this.receipt = Objects.requireNonNull(receipt, "receipt");
    }

    public boolean retryable() {
        return retryable;
    }

    /** What the destination answered. */
    public Receipt receipt() {
        return receipt;
    }
}
