package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.tx.ManualTransactions;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.concurrent.atomic.AtomicLong;

/**
 * How a generated caller ends its {@link ManualTransactions} transaction, and what the scope must say on the way
 * ({@link MismatchPropertyTest}, {@link OrderedMismatchPropertyTest}): roll it back, or roll back to its savepoint
 * (when it set one) and commit, or commit. A rollback to a savepoint set before the failure that doomed the transaction
 * undoes it and the doom with it; one set after keeps it. The commit is refused exactly when the transaction is doomed.
 */
enum CallerTransactionEnd {
    /** Rolled back whole: nothing of it stands. */
    ROLLED_BACK,
    /** Committed, or refused because doomed: what the caller's view held stands when it was not doomed. */
    COMMIT,
    /** Rolled back to the savepoint, then committed or refused: what the view held at the savepoint stands. */
    COMMIT_FROM_SAVEPOINT;

    /**
     * Ends {@code scope} as {@code end} says (0 commit, 1 rollback to {@code savepoint} and commit, 2 rollback; 1
     * without a savepoint commits), checking rollback-only after a rollback to the savepoint and the commit's refusal.
     *
     * @param failure what doomed the transaction, for the messages ("failure", "doom")
     * @return how it ended, and {@link #committed} whether it committed
     */
    static Ended end(
            ManualTransactions.Scope scope,
            int end,
            Savepoint savepoint,
            boolean doomed,
            boolean savepointBeforeDoom,
            String when,
            String failure,
            AtomicLong rescued,
            AtomicLong keptDoomed)
            throws SQLException {
        if (end == 2) {
            scope.rollback();
            return new Ended(ROLLED_BACK, false);
        }
        CallerTransactionEnd how = COMMIT;
        if (end == 1 && savepoint != null) {
            scope.rollback(savepoint);
            how = COMMIT_FROM_SAVEPOINT;
            if (doomed) {
                (savepointBeforeDoom ? rescued : keptDoomed).incrementAndGet();
            }
            // what doomed it came after the savepoint: the rollback undid it and the doom with it
            doomed = doomed && !savepointBeforeDoom;
            assertThat(scope.rollbackOnly())
                    .as(when + ": rollback-only after the rollback to the savepoint, set "
                            + (savepointBeforeDoom ? "before" : "after") + " the " + failure)
                    .isEqualTo(doomed);
        }
        SQLException refused = null;
        try {
            scope.commit();
        } catch (SQLException e) {
            refused = e;
        }
        assertThat(refused != null)
                .as(when + ": the commit is refused exactly when the transaction is doomed: " + refused)
                .isEqualTo(doomed);
        return new Ended(how, !doomed);
    }

    /** How the transaction ended, and whether it committed. */
    record Ended(CallerTransactionEnd how, boolean committed) {}
}
