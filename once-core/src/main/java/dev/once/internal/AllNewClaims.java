package dev.once.internal;

import dev.once.Inbox;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The claims of a transaction the engine owns, for ids it expects to be new (a broker redelivers
 * rarely): {@link Dialect#claimBatchAllNew} for a batch, {@link Dialect#claimNew} for one delivery,
 * plain inserts that are cheaper than the {@code ON CONFLICT} claim. When an id was claimed before,
 * the insert fails with a unique violation, the transaction is aborted, and the caller rolls it back:
 * a batch claims again with {@link Inbox#claimAll}, which says which ids were new; one delivery is a
 * duplicate (one delivery takes this form only when {@link CopyHint} expects its id new: building the
 * driver's exception is dearer than the {@code ON CONFLICT} claim). It must be the transaction's first
 * statement: the rollback undoes all of it.
 * Thread-safe. Not API.
 */
final class AllNewClaims {

    private final Dialect dialect;
    private final String prefix;
    private final Duration lockTimeout;
    private final Clock clock;
    private final Map<Integer, String> sql = new ConcurrentHashMap<>();
    private final String consumer;
    // The one-id claim with the consumer's name in its text (Dialect.claimNewFor), built once: two binds per
    // claim, not three; or, where the dialect has no such form, the one that binds the consumer.
    private final String oneSql;
    private final boolean oneBindsConsumer;
    private final LockTimeoutRestore restore;

    private AllNewClaims(Inbox inbox, String consumer, Clock clock, StatementsTogether together) {
        this.dialect = inbox.dialect();
        this.prefix = inbox.tablePrefix();
        this.lockTimeout = inbox.lockTimeout().orElse(null);
        this.clock = clock;
        this.consumer = consumer;
        String named = dialect.claimNewFor(prefix, lockTimeout, consumer);
        this.oneSql = named != null ? named : dialect.claimNew(prefix, lockTimeout);
        this.oneBindsConsumer = named == null;
        this.restore = new LockTimeoutRestore(dialect, lockTimeout, together);
    }

    /** The claims of {@code consumer} (a validated name) on {@code inbox}; null when its dialect has no such statements. */
    static AllNewClaims of(Inbox inbox, String consumer, Clock clock, StatementsTogether together) {
        Dialect dialect = inbox.dialect();
        return dialect.supportsBatchClaim()
                        && dialect.claimBatchAllNew(inbox.tablePrefix(), null, 2) != null
                        && dialect.claimNew(inbox.tablePrefix(), null) != null
                ? new AllNewClaims(inbox, consumer, clock, together)
                : null;
    }

    /**
     * Claims one id. True when claimed; false when it was claimed before: the transaction is aborted
     * and must be rolled back. A transaction holding the id makes it wait, as {@link Inbox#claim} does.
     */
    boolean claim(Connection c, String eventId) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(restore.claim(c, oneSql))) {
            int i = 1;
            if (oneBindsConsumer) {
                ps.setString(i++, consumer); // consumer, where the dialect has no claimNewFor
            }
            ps.setString(i++, eventId); // event_id
            dialect.bindProcessedAt(ps, i, clock.instant()); // processed_at
            ps.execute(); // the insert's count; the lock timeout's restore may follow
        } catch (SQLException e) {
            if (dialect.isUniqueViolation(e)) {
                return false;
            }
            throw e;
        }
        restore.afterClaim(c);
        return true;
    }

    /**
     * Claims every id, in sorted order and chunks as {@link Inbox#claimAll} does (one global lock
     * order). True when all were claimed; false when one was claimed before: the transaction is
     * aborted and must be rolled back.
     */
    boolean claimAll(Connection c, Collection<String> ids) throws SQLException {
        String[] sorted = ids.toArray(new String[0]);
        Arrays.sort(sorted);
        Timestamp now = Timestamp.from(clock.instant());
        for (String[] part : Chunks.of(sorted, dialect.maxBatchClaimSize())) {
            String statement = sql.computeIfAbsent(part.length, n -> dialect.claimBatchAllNew(prefix, lockTimeout, n));
            try (PreparedStatement ps = c.prepareStatement(restore.claim(c, statement))) {
                dialect.bindBatchClaim(ps, consumer, now, part);
                ps.execute(); // the first result is the insert's count; the lock timeout's restore may follow
            } catch (SQLException e) {
                if (dialect.isUniqueViolation(e)) {
                    return false;
                }
                throw e;
            }
            restore.afterClaim(c);
        }
        return true;
    }
}
