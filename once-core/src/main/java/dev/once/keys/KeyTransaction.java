package dev.once.keys;

import dev.once.HandlerMisuseException;
import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.internal.ClaimWatch;
import dev.once.internal.GuardedConnection;
import dev.once.internal.Transactions;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * The transaction of one started request on the idempotency keys' database
 * ({@link IdempotencyKeys#transaction}): the request applies its effect on {@link #connection()}, and
 * {@link #complete} saves the result in the same transaction and commits both.
 *
 * <pre>{@code
 * try (KeyTransaction t = keys.transaction(started)) {
 *     debit(t.connection(), account, amount);        // the effect, not committed yet
 *     t.complete(201, receipt);                      // the result with it: both commit, or neither
 * }                                                  // closed unfinished: rolled back
 * }</pre>
 *
 * <p><b>Fencing.</b> The saved result is fenced by the claim's {@link #token()}, and here the effect is
 * fenced with it: if the claim lapsed and another caller took the key over, {@link #complete} throws
 * {@link StaleFencingTokenException} and rolls the whole transaction back, so only the successor's
 * effect commits. Writes elsewhere (another database, an external API) are not covered: pass the
 * key on to them, or send them through the outbox. A fence the request's code checks on {@link #connection()}
 * ({@link dev.once.lease.Fence#check}, a lease's token for another resource) is checked again last before the
 * commit, as a handler's: one undone by a rollback to a savepoint, or refused and caught, fails {@link #complete}
 * with {@link StaleFencingTokenException} where a newer token was accepted since, and everything rolls back.
 *
 * <p><b>Bounded wait.</b> Saving the result waits at most {@link IdempotencyKeys.Builder#lockWait} for
 * another transaction holding the key's row (a successor's that took it over after this claim lapsed
 * and has not committed, a begin taking it over), as {@link IdempotencyKeys#complete(BeginResult.Started,
 * int, byte[])} does; past it the whole transaction, effect included, rolls back and {@link #complete}
 * throws {@link OnceException}. The effect's own statements wait as the session's lock timeout allows.
 *
 * <p>Not thread-safe: the request's thread owns it. Close it in every case.
 */
public final class KeyTransaction implements AutoCloseable {

    private final IdempotencyKeys keys;
    private final BeginResult.Started started;
    private final Transactions.Open tx;
    private final ClaimWatch watch;
    private final GuardedConnection guard;

    KeyTransaction(IdempotencyKeys keys, BeginResult.Started started, Transactions.Open tx) {
        this.keys = keys;
        this.started = started;
        this.tx = tx;
        this.watch = keys.watch(tx.connection());
        this.guard = keys.guard(tx.connection(), watch);
    }

    /** The claim this transaction finishes. */
    public BeginResult.Started started() {
        return started;
    }

    /** The claim's fencing token, for logs and for passing on with the request's downstream calls. */
    public long token() {
        return started.token();
    }

    /**
     * The transaction's connection, auto-commit off: apply the effect on it. {@link #complete},
     * {@link #fail} and {@link #close} end the transaction; the connection refuses to
     * ({@code commit}, {@code rollback()}, {@code setAutoCommit}, {@code close}, {@code COMMIT} or
     * {@code ROLLBACK} as SQL throw {@link HandlerMisuseException}), so that the effect never commits
     * apart from the result, and {@link #complete} after a refused call rolls everything back.
     * Savepoints are allowed.
     *
     * @throws IllegalStateException once the transaction has ended
     */
    public Connection connection() {
        open();
        return guard;
    }

    /**
     * Saves the result (as {@link IdempotencyKeys#complete}) and commits it with the effect.
     *
     * @throws StaleFencingTokenException if another caller took the key over, or a fence checked on
     *         {@link #connection()} is no longer the newest: everything rolled back
     * @throws IdempotencyResultTooLargeException if the body exceeds the cap: everything rolled back
     * @throws OnceException if another transaction held the key's row longer than
     *         {@link IdempotencyKeys.Builder#lockWait}: everything rolled back, the key still processing
     * @throws SQLException if the database fails: rolled back, unless the commit itself failed, when
     *         whether it committed is unknown (a retry of the request then replays or runs again)
     * @throws HandlerMisuseException if the request's code tried to end the transaction on
     *         {@link #connection()} and went on: everything rolled back, nothing saved
     */
    public void complete(int status, byte[] body) throws SQLException {
        open();
        refuseAfterMisuse();
        keys.finishAndCommit(tx, watch, started, IdempotencyKeys.SUCCEEDED, status, body);
    }

    /**
     * Records a failure. Retryable: the effect is rolled back and the key released, so the next
     * request with it runs afresh. Not retryable: the failure is saved, to be replayed, and commits
     * with whatever the request wrote (a declined payment's audit row).
     *
     * @throws StaleFencingTokenException as {@link #complete}, for a failure to save: everything rolled back
     * @throws OnceException as {@link #complete}, a saved failure waiting longer than the lock wait
     * @throws HandlerMisuseException as {@link #complete}, for a failure to save
     */
    public void fail(boolean retryable, int status, byte[] body) throws SQLException {
        open();
        if (retryable) {
            tx.rollback();
            keys.fail(started, true, status, null);
            return;
        }
        refuseAfterMisuse();
        keys.finishAndCommit(tx, watch, started, IdempotencyKeys.FAILED, status, body);
    }

    /**
     * Rolls back what was not completed and hands the connection back. The key stays claimed until
     * its lock lapses; release it sooner with {@link IdempotencyKeys#fail} (retryable).
     */
    @Override
    public void close() throws SQLException {
        tx.close();
    }

    // The request's code caught the refusal of a call that would have ended the transaction: what it did after
    // assumed an outcome that did not happen, so nothing of it is saved.
    private void refuseAfterMisuse() throws SQLException {
        String misuse = guard.misuse();
        if (misuse != null) {
            tx.rollback();
            throw new HandlerMisuseException("the request tried " + misuse + " on the transaction of idempotency key '"
                    + started.key() + "' in scope '" + started.scope() + "' and went on; its effect is rolled back and"
                    + " nothing is saved: remove the call");
        }
    }

    private void open() {
        if (tx.ended()) {
            throw new IllegalStateException("the transaction of idempotency key '" + started.key()
                    + "' has ended; apply effects before complete or fail");
        }
    }
}
