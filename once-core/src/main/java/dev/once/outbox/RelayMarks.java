package dev.once.outbox;

import dev.once.RetryPolicy;
import dev.once.internal.OutboxRepository;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a row becomes after its send, by the relay's retry policy: sent with the destination's
 * receipt; on a retryable failure, available again after the policy's delay for its attempt; dead
 * on a permanent failure or once the policy allows no more retries. Also the attempt a fenced batch
 * still counts. Writing the marks is the relay's transaction. Thread-safe.
 */
final class RelayMarks {

    // The relay's logger, as before the marks had a class of their own.
    private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);

    private final String relay;
    private final RetryPolicy retryPolicy;
    private final Clock clock;
    private final OutboxRepository repository;

    RelayMarks(String relay, RetryPolicy retryPolicy, Clock clock, OutboxRepository repository) {
        this.relay = relay;
        this.retryPolicy = retryPolicy;
        this.clock = clock;
        this.repository = repository;
    }

    /** The mark of row {@code m} after its send ended with {@code a}. */
    OutboxRepository.Mark of(OutboxMessage m, RelaySends.Attempt a) {
        Instant now = clock.instant();
        if (a.failure() == null) {
            return new OutboxRepository.Sent(m.id(), now, a.receipt());
        }
        int attempts = m.attempts() + 1;
        String error = String.valueOf(a.failure());
        if (a.permanent() || !retryPolicy.allowsRetry(attempts)) {
            dead(m, attempts, error);
            return new OutboxRepository.Dead(m.id(), error, a.receipt());
        }
        return new OutboxRepository.Retry(m.id(), now.plus(retryPolicy.delay(attempts)), error, a.receipt());
    }

    /**
     * Locks those of the {@code attempted} rows of a fenced batch that are still pending and writes an
     * attempt for each, with {@code error}; returns the marks written.
     *
     * <p>A fenced batch still counts: each row it sent gets an attempt, so relays that keep losing the
     * lease mid-batch (a send longer than the lease) end in dead when the retry policy is spent instead
     * of re-sending the rows forever with attempts at 0. The rows stay available now: the new holder is
     * not slow, it need not back off. Rows the new holder has locked are its to count.
     */
    List<OutboxRepository.Mark> countFenced(Connection c, List<OutboxMessage> attempted, String error)
            throws SQLException {
        List<OutboxRepository.Mark> counted = new ArrayList<>();
        for (OutboxMessage m : attempted) {
            Optional<OutboxRepository.Pending> p = repository.lockPending(c, m.id());
            if (p.isEmpty()) {
                continue;
            }
            if (!retryPolicy.allowsRetry(p.get().attempts() + 1)) {
                dead(m, p.get().attempts() + 1, error);
                counted.add(new OutboxRepository.Dead(m.id(), error, null));
            } else {
                counted.add(new OutboxRepository.Retry(m.id(), p.get().availableAt(), error, null));
            }
        }
        repository.mark(c, counted, false);
        return counted;
    }

    private void dead(OutboxMessage m, int attempts, String error) {
        log.warn(
                "relay {}: row {} (event {}) is dead after {} attempt(s): {}",
                relay,
                m.id(),
                m.eventId(),
                attempts,
                error);
    }
}
