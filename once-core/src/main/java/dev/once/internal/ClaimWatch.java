package dev.once.internal;

import dev.once.OutboxHeaders;
import dev.once.StaleFencingTokenException;
import dev.once.internal.fence.FenceSet;
import dev.once.internal.fence.TakenFence;
import dev.once.jdbc.Dialect;
import dev.once.lease.Fence;
import dev.once.tx.JoinedTransaction;
import dev.once.tx.SavepointListener;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.Locale;

/**
 * What the engine learns, through the handler's {@link GuardedConnection}s, about one claim
 * transaction while its handlers run: where the outbox buffer stood at each savepoint (so a rollback
 * to it takes back the rows added since), and whether anything happened that can take the claim out
 * of the transaction without the guard refusing it. Only then does the engine spend a statement on
 * the claim check (see {@code ClaimCheck.verifyClaim}). One per claim transaction,
 * shared by the handler calls of a batch. Not thread-safe. Not API.
 */
public final class ClaimWatch implements SavepointListener {

    /**
     * What every claim transaction of one consumer shares, made once per consumer: a watch holds it
     * instead of copies of its parts (one watch per delivery on the per-record path).
     *
     * @param inboxTable the inbox table's name in lower case, {@link #inboxTable(String)}: computed once
     *     per consumer, not per claim transaction (issue 21: it was a string built per event)
     * @param harmless the consumer's SQL strings already found harmless; the ones found harmless here are
     *     added
     */
    public record Consumer(
            Dialect dialect,
            String inboxTable,
            HarmlessSql harmless,
            OutboxRepository outboxRepository,
            Clock clock,
            OutboxHeaders outboxHeaders) {}

    private final Consumer consumer;
    private final Connection connection;
    // Made by the first outbox(): most claim transactions add no row, and this was one more object per
    // delivery (issue 21). A savepoint set before it exists needs no mark: every row it will hold is added
    // after that savepoint, so a rollback to it undoes them all, which is what the buffer does with a
    // savepoint it never heard of.
    private OutboxBuffer outbox;
    // The caller's transaction the handlers run in, or null in an owned one: see confines.
    private JoinedTransaction joined;
    private String suspicion;
    private SQLException ended;
    // The fences the handlers took, checked again before the commit; null until one is.
    private FenceSet fences;

    /** The watch of one claim transaction of {@code consumer} on {@code connection}, the raw one. */
    public ClaimWatch(Consumer consumer, Connection connection) {
        this.consumer = consumer;
        this.connection = connection;
    }

    /** The handlers run in {@code joined}, the caller's transaction (whose integration may confine them). */
    void joined(JoinedTransaction joined) {
        this.joined = joined;
    }

    /**
     * Whether the integration confined the handler to {@code guard} ({@link
     * JoinedTransaction#confineHandlerTo}): the caller's code finds it where it looks the transaction's
     * connection up, so the guard stands for that connection, unwrap included.
     */
    boolean confines(GuardedConnection guard) {
        return joined != null && joined.handlerConfinedTo() == guard;
    }

    /** Whether {@code sql} was read before and is harmless: the guard need not read it again. */
    boolean knownHarmless(String sql) {
        return consumer.harmless().contains(sql);
    }

    /** The name {@link #ClaimWatch} looks for in the handler's SQL: the inbox table under {@code prefix}, lower case. */
    public static String inboxTable(String prefix) {
        return (prefix + "inbox").toLowerCase(Locale.ROOT);
    }

    /** The transaction's outbox rows, made on the first call: a handler asks for it to add one. */
    public OutboxBuffer outbox() {
        if (outbox == null) {
            outbox = new OutboxBuffer(
                    connection, consumer.outboxRepository(), consumer.clock(), consumer.outboxHeaders());
        }
        return outbox;
    }

    /** Writes the outbox rows buffered so far, if the transaction has any. */
    public void flushOutbox() throws SQLException {
        if (outbox != null) {
            outbox.flush();
        }
    }

    Dialect dialect() {
        return consumer.dialect();
    }

    /** What the handler did that may have cost the claim, or null when nothing did: no check is needed then. */
    public String suspicion() {
        return suspicion;
    }

    /** The error the database reported as having rolled the whole transaction back, or null. */
    public SQLException ended() {
        return ended;
    }

    void suspect(String what) {
        if (suspicion == null) {
            suspicion = what;
        }
    }

    /** An SQLException on its way to the handler, which may swallow it. Returns it to be thrown. */
    SQLException failed(SQLException e) {
        suspect("a statement failed (SQLState " + e.getSQLState() + ")");
        if (ended == null && consumer.dialect().endsTransaction(e)) {
            ended = e;
        }
        return e;
    }

    /**
     * A fence taken in this transaction ({@code Tx.fence}, or {@link Fence#check} on the guard), recorded before it
     * is checked, so that a refusal the code catches is found again.
     */
    void fenced(TakenFence fence) {
        if (fences == null) {
            fences = new FenceSet();
        }
        fences.take(fence);
    }

    /**
     * Checks every fence of the transaction again, last before the commit ({@link FenceSet}: a rollback to a
     * savepoint may have undone a check, as in a Spring NESTED step that failed, or a handler caught its refusal
     * and went on). Two statements per fenced resource, only where a handler fenced.
     *
     * @throws StaleFencingTokenException naming the token, the newest and the resource
     */
    public void fenceAgain(Connection raw) throws SQLException {
        if (fences != null) {
            fences.checkAll(
                    raw,
                    "found when the transaction's fences were checked again before its commit (a rollback to a"
                            + " savepoint undid the handler's check, or the handler caught its refusal and went on);"
                            + " this writer's lease was taken over");
        }
    }

    /**
     * The transaction's savepoints, from the handler's guard and (while a handler runs in a caller's transaction)
     * its {@link JoinedTransaction}: forwarded to the outbox buffer once it exists (see {@link #outbox}).
     */
    @Override
    public void savepoint(Object savepoint) {
        if (outbox != null) {
            outbox.savepoint(savepoint);
        }
    }

    @Override
    public void rollbackToSavepoint(Object savepoint) {
        if (outbox != null) {
            outbox.rollbackToSavepoint(savepoint);
        }
    }

    @Override
    public void releaseSavepoint(Object savepoint) {
        if (outbox != null) {
            outbox.releaseSavepoint(savepoint);
        }
    }

    /**
     * SQL the guard lets through that needs the engine's attention: a {@code SAVEPOINT} or
     * {@code ROLLBACK TO} in SQL text has no {@link Savepoint} object to key a position on, so the
     * buffer is written before either runs: the rows added before the savepoint land outside it, those
     * added after it inside it, and the database's own rollback undoes exactly those (SQL savepoints
     * are rare; JDBC ones cost no statement, see {@link OutboxBuffer#savepoint}); a procedure call may end the
     * transaction out of sight (MariaDB); a statement naming the inbox may delete the claim.
     */
    void sql(String sql, String firstWord) throws SQLException {
        if (firstWord != null) {
            switch (firstWord) {
                case "SAVEPOINT", "ROLLBACK" -> flushOutbox();
                case "CALL", "EXECUTE" -> suspect(firstWord + " (a procedure may end the transaction)");
                default -> {}
            }
        }
        if (mentionsInbox(sql)) {
            suspect("a statement naming " + consumer.inboxTable());
        } else if (firstWord == null) {
            consumer.harmless().add(sql);
        }
    }

    private boolean mentionsInbox(String sql) {
        String inboxTable = consumer.inboxTable();
        int n = inboxTable.length();
        char first = inboxTable.charAt(0);
        for (int i = 0, last = sql.length() - n; i <= last; i++) {
            char ch = sql.charAt(i);
            if ((ch == first || Character.toLowerCase(ch) == first) && sql.regionMatches(true, i, inboxTable, 0, n)) {
                return true;
            }
        }
        return false;
    }
}
