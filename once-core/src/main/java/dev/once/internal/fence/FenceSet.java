package dev.once.internal.fence;

import dev.once.StaleFencingTokenException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;

/**
 * The fences one transaction took, kept to be checked again last before it commits, by whoever commits it:
 * the engine for a claim or key transaction, once-spring for a Spring-managed one. A check holds only as long
 * as its statements stand: a rollback to a savepoint taken before it undoes its token and, on PostgreSQL (and
 * MariaDB when the check inserted the row), frees the fence row, so a newer holder's check passes and commits
 * and this transaction's writes would commit after it (LeaseFencePropertyTest, SpringFencePropertyTest); and
 * the caller may catch the refusal and write on, the database having seen nothing fail. Checked again, the
 * newest token of each resource is this transaction's until the commit (the row stays locked), or the commit
 * does not happen. Not thread-safe: belongs to the transaction's thread.
 */
public final class FenceSet {

    // One lock order in every transaction: by table prefix, then resource.
    private static final Comparator<TakenFence> LOCK_ORDER =
            Comparator.comparing(TakenFence::prefix).thenComparing(TakenFence::resource);

    // The newest token taken for each resource, as the fence that took it.
    private final Map<TakenFence, TakenFence> newest = new TreeMap<>(LOCK_ORDER);

    /**
     * Records {@code fence}, before it is checked (so that a refusal the caller catches is found again): the
     * newest token of its resource is the one checked again.
     */
    public void take(TakenFence fence) {
        newest.merge(fence, fence, (a, b) -> a.token() >= b.token() ? a : b);
    }

    /**
     * Checks every fence again on {@code connection}, two statements each, in lock order.
     *
     * @param why what a refusal's message says after the newest token: where it was found, and why the
     *     first check no longer stood
     * @throws StaleFencingTokenException naming the token, the newest and the resource, and {@code why}
     * @throws SQLException the driver's error
     */
    public void checkAll(Connection connection, String why) throws SQLException {
        for (TakenFence f : newest.values()) {
            try {
                f.checkOn(connection);
            } catch (StaleFencingTokenException e) {
                throw new StaleFencingTokenException(
                        e.resource(), e.token(), e.newest(), "the newest accepted token is " + e.newest() + ", " + why);
            }
        }
    }

    /** The resources fenced, each as its table prefix and resource. */
    @Override
    public String toString() {
        StringBuilder s = new StringBuilder("[");
        for (TakenFence f : newest.values()) {
            s.append(s.length() == 1 ? "" : ", ").append(f.prefix()).append(' ').append(f.resource());
        }
        return s.append(']').toString();
    }
}
