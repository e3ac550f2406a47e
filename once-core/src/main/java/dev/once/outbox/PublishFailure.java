package dev.once.outbox;

import dev.once.OnceException;
import java.util.Objects;

/**
 * The one way a {@link Publisher} reports a failed send: {@link #retryable()} decides what the relay
 * does next, try again later with backoff or move the row to {@code dead} at once, and
 * {@link #receipt()} records what the destination answered (an HTTP 503 or 422 and its body, an
 * AMQP reply code), or {@link Receipt#NONE}. Build one with {@link #permanent} or {@link #retryable}.
 */
public class PublishFailure extends OnceException {

    private final boolean retryable;
    private final Receipt receipt;

    /**
     * @param receipt what the destination answered; {@link Receipt#NONE} when it answered nothing
     */
    public PublishFailure(String message, boolean retryable, Receipt receipt) {
        this(message, retryable, receipt, null);
    }

    /**
     * @param receipt what the destination answered; {@link Receipt#NONE} when it answered nothing
     * @param cause   the client's exception, may be null
     */
    public PublishFailure(String message, boolean retryable, Receipt receipt, Throwable cause) {
        super(message, cause);
        this.retryable = retryable;
        this.receipt = Objects.requireNonNull(receipt, "receipt");
    }

    /** Sending again can never succeed: the row goes to {@code dead} at once. */
    public static PublishFailure permanent(String message, Receipt receipt, Throwable cause) {
        return new PublishFailure(message, false, receipt, cause);
    }

    /** Sending again may succeed: the row is retried with the relay's backoff. */
    public static PublishFailure retryable(String message, Receipt receipt, Throwable cause) {
        return new PublishFailure(message, true, receipt, cause);
    }

    public boolean retryable() {
        return retryable;
    }

    /** What the destination answered. */
    public Receipt receipt() {
        return receipt;
    }
}
