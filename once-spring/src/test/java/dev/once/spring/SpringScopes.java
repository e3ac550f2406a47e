package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.DefaultTransactionDefinition;

/**
 * The caller's nested Spring transaction scopes, for the caller-transaction generators
 * ({@link SpringCallerTransactionPropertyTest}, {@link RabbitChannelCallerTransactionPropertyTest}, {@link
 * SqsAcknowledgementCallerTransactionPropertyTest}, {@link PubSubCallerTransactionPropertyTest}): begin with
 * propagation REQUIRED, NESTED or REQUIRES_NEW, commit, rollback and setRollbackOnly on the innermost scope, through
 * a real {@link PlatformTransactionManager}, with Spring's propagation rules replayed on the scopes
 * ({@code AbstractPlatformTransactionManager}'s getTransaction, commit and processRollback), so that a generator
 * knows what each move did: a physical transaction committed or rolled back, a rollback to a savepoint, or a scope
 * that ended into the one around it. What a scope holds (the generator's items) goes with it into the enclosing
 * scope, or back to the generator when its physical transaction ends or its savepoint is rolled back to.
 */
final class SpringScopes {

    /** The propagations a caller begins a scope with. */
    enum Kind {
        REQUIRED(TransactionDefinition.PROPAGATION_REQUIRED),
        NESTED(TransactionDefinition.PROPAGATION_NESTED),
        REQUIRES_NEW(TransactionDefinition.PROPAGATION_REQUIRES_NEW);

        final int propagation;

        Kind(int propagation) {
            this.propagation = propagation;
        }
    }

    /** One physical transaction: its number in begin order, the rollback-only mark on it, what its savepoints undid. */
    static final class Physical {
        final int number;
        boolean rollbackOnly;
        // items a rollback to a savepoint undid, for the generator to report when this transaction ends (never
        // before: JoinedTransaction's rule), so after any REQUIRES_NEW transaction that ends first
        final List<String> undone = new ArrayList<>();

        Physical(int number) {
            this.number = number;
        }
    }

    /** One scope the caller opened: a physical transaction, a participation in one, or a savepoint. */
    static final class Scope {
        final TransactionStatus status;
        final Physical physical;
        final boolean newPhysical;
        final boolean savepoint;
        final List<String> items = new ArrayList<>();
        boolean localRollbackOnly;

        Scope(TransactionStatus status, Physical physical, boolean newPhysical, boolean savepoint) {
            this.status = status;
            this.physical = physical;
            this.newPhysical = newPhysical;
            this.savepoint = savepoint;
        }
    }

    /** What a commit or rollback of the innermost scope did, by Spring's rules. */
    enum End {
        /** Its physical transaction committed. */
        COMMITTED,
        /** Its physical transaction rolled back. */
        ROLLED_BACK,
        /** Rolled back to its savepoint, which clears the transaction's rollback-only mark. */
        TO_SAVEPOINT,
        /** A participant or a released savepoint: its items are the enclosing scope's now. */
        INTO_ENCLOSING
    }

    /** The scope a commit or rollback ended, what it did, and what the transaction manager threw (else null). */
    record Ended(Scope scope, End end, RuntimeException thrown) {

        /** A physical transaction ended. */
        boolean physical() {
            return end == End.COMMITTED || end == End.ROLLED_BACK;
        }
    }

    private final PlatformTransactionManager tm;
    private final Deque<Scope> scopes = new ArrayDeque<>();
    private int physicals;

    SpringScopes(PlatformTransactionManager tm) {
        this.tm = tm;
    }

    boolean isEmpty() {
        return scopes.isEmpty();
    }

    int size() {
        return scopes.size();
    }

    /** The innermost scope. */
    Scope top() {
        return scopes.peek();
    }

    /** The open scopes, innermost first. */
    Iterable<Scope> open() {
        return scopes;
    }

    /**
     * Begins a scope with {@code kind}; an exception of the transaction manager (no savepoint in a transaction the
     * database aborted) leaves the scopes as they were.
     */
    Scope begin(Kind kind) {
        TransactionStatus status = tm.getTransaction(new DefaultTransactionDefinition(kind.propagation));
        Scope top = scopes.peek();
        boolean newPhysical = top == null || kind == Kind.REQUIRES_NEW;
        boolean savepoint = top != null && kind == Kind.NESTED;
        assertThat(status.isNewTransaction())
                .as("a new transaction for %s", kind)
                .isEqualTo(newPhysical);
        assertThat(status.hasSavepoint()).as("a savepoint for %s", kind).isEqualTo(savepoint);
        Scope scope = new Scope(status, newPhysical ? new Physical(++physicals) : top.physical, newPhysical, savepoint);
        scopes.push(scope);
        return scope;
    }

    void setRollbackOnly() {
        Scope top = scopes.peek();
        top.status.setRollbackOnly();
        top.localRollbackOnly = true;
    }

    /** Commits the innermost scope. */
    Ended commit() {
        Scope top = scopes.pop();
        RuntimeException thrown = null;
        try {
            tm.commit(top.status);
        } catch (RuntimeException e) {
            thrown = e;
        }
        boolean rollsBack = top.localRollbackOnly || top.physical.rollbackOnly;
        if (top.newPhysical) {
            return new Ended(top, rollsBack ? End.ROLLED_BACK : End.COMMITTED, thrown);
        }
        if (top.savepoint) {
            if (rollsBack) {
                top.physical.rollbackOnly = false;
                return new Ended(top, End.TO_SAVEPOINT, thrown);
            }
            return intoEnclosing(top, thrown);
        }
        if (top.localRollbackOnly) {
            top.physical.rollbackOnly = true;
        }
        return intoEnclosing(top, thrown);
    }

    /** Rolls back the innermost scope. */
    Ended rollback() {
        Scope top = scopes.pop();
        RuntimeException thrown = null;
        try {
            tm.rollback(top.status);
        } catch (RuntimeException e) {
            thrown = e;
        }
        if (top.newPhysical) {
            return new Ended(top, End.ROLLED_BACK, thrown);
        }
        if (top.savepoint) {
            top.physical.rollbackOnly = false;
            return new Ended(top, End.TO_SAVEPOINT, thrown);
        }
        top.physical.rollbackOnly = true; // a participant's rollback dooms the whole transaction
        return intoEnclosing(top, thrown);
    }

    private Ended intoEnclosing(Scope top, RuntimeException thrown) {
        scopes.peek().items.addAll(top.items);
        return new Ended(top, End.INTO_ENCLOSING, thrown);
    }

    /** Rolls back what a failed run left open, innermost first, so that the next run (a shrunk one) starts clean. */
    void abandon() {
        while (!scopes.isEmpty()) {
            try {
                tm.rollback(scopes.pop().status);
            } catch (RuntimeException e) {
                // the run failed already; this only cleans up
            }
        }
    }
}
