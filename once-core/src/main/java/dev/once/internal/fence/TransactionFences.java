package dev.once.internal.fence;

import java.sql.Connection;

/**
 * How {@link dev.once.lease.Fence#check} tells the integration that manages the caller's transaction of a
 * fence taken on one of its connections, so that the integration checks it again last before that transaction
 * commits. A check holds only as long as its statements stand: a rollback to a savepoint taken before it
 * undoes it and frees the fence row (PostgreSQL), and a caller may catch the refusal and write on; checked
 * again at the commit, in the transaction's outer scope, the newest token is this transaction's or the
 * commit fails. {@code once-spring} provides one for Spring-managed transactions.
 *
 * <p>Not API: this package is exported to {@code dev.once.spring} only (a qualified export in once-core's
 * module-info), so the seam can change with its one implementation. Found with {@link java.util.ServiceLoader}
 * on once-core's class loader, once, when {@code Fence} is first used; with none found a check costs nothing
 * more. An implementation is called on the checking thread before the check's statements run (so a refusal
 * the caller catches is found again), must return at once for a connection that is not one of its
 * transactions', must be thread-safe, and must run the check again with {@link TakenFence#checkOn}, which
 * tells no integration.
 */
public interface TransactionFences {

    /** {@code fence} is about to be checked on {@code connection}, in the caller's transaction. */
    void taken(Connection connection, TakenFence fence);
}
