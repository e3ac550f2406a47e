package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.tx.JoinedTransaction;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * The checks an integration runs right before its commit ({@link JoinedTransaction#runChecks}): each
 * pending one runs once, in order, the last alone may commit, one a rollback to a savepoint undid
 * never runs, and the integration's "nothing else is due before the commit" is asked only when a
 * check is pending (once-spring's answer looks at all of Spring's synchronizations and resources).
 */
class JoinedTransactionChecksTest {

    private final JoinedTransaction joined = JoinedTransaction.checkingBeforeCommit();
    // What each check was told, "name:commit", in the order they ran
    private final List<String> ran = new ArrayList<>();
    private int asked;

    private void check(String name) {
        joined.checkBeforeCommit(commit -> {
            ran.add(name + ":" + commit);
            return commit;
        });
    }

    private final BooleanSupplier nothingElseDue = () -> {
        asked++;
        return true;
    };

    @Test
    void eachPendingCheckRunsOnceInOrderAndOnlyTheLastMayCommit() throws Exception {
        check("a");
        check("b");

        assertThat(joined.runChecks(nothingElseDue))
                .as("the last check committed")
                .isTrue();
        assertThat(joined.runChecks(nothingElseDue))
                .as("nothing left to run, nothing committed")
                .isFalse();

        assertThat(ran)
                .as("each check ran once, only the last told it may commit")
                .containsExactly("a:false", "b:true");
        assertThat(asked)
                .as("asked for the first run only: the second found no check pending")
                .isEqualTo(1);
    }

    @Test
    void aCheckARollbackToASavepointUndidNeverRunsAndTheCallbacksHearTheirOwnEnd() throws Exception {
        List<Boolean> heard = new ArrayList<>();
        check("before");
        joined.afterCompletion(heard::add);
        joined.savepoint("s1");
        check("undone");
        joined.afterCompletion(heard::add);
        joined.rollbackToSavepoint("s1");

        joined.runChecks(nothingElseDue);
        joined.completed(true);

        assertThat(ran).as("the check the rollback undid never runs").containsExactly("before:true");
        assertThat(heard)
                .as("the callback before the savepoint stands, the one after it was undone")
                .containsExactly(true, false);
    }

    @Test
    void aRollbackToTheStartUndoesEverythingRegisteredAndForgetsItsSavepoints() throws Exception {
        List<Boolean> heard = new ArrayList<>();
        List<Object> toldListener = new ArrayList<>();
        joined.addSavepointListener(new dev.once.tx.SavepointListener() {
            @Override
            public void savepoint(Object savepoint) {}

            @Override
            public void rollbackToSavepoint(Object savepoint) {
                toldListener.add(savepoint);
            }

            @Override
            public void releaseSavepoint(Object savepoint) {}
        });
        check("first");
        joined.afterCompletion(heard::add);
        joined.savepoint("s1");
        joined.afterCompletion(heard::add);
        // a savepoint taken before the integration knew the transaction: its start
        joined.rollbackToSavepoint(JoinedTransaction.START);
        joined.afterCompletion(heard::add);

        joined.runChecks(nothingElseDue);
        joined.completed(true);

        assertThat(ran).as("the check the rollback undid never runs").isEmpty();
        assertThat(heard)
                .as("everything registered before the rollback was undone, what came after stands")
                .containsExactly(false, false, true);
        assertThat(toldListener).as("the listeners hear of it").containsExactly(JoinedTransaction.START);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> joined.rollbackToSavepoint("s1"))
                .as("the savepoints after the start are gone")
                .isInstanceOf(IllegalStateException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> joined.rollbackToSavepoint(joined))
                .as("the transaction object is no savepoint (it once stood for the start)")
                .isInstanceOf(IllegalStateException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> joined.savepoint(JoinedTransaction.START))
                .as("the start is not announced")
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("JoinedTransaction.START");
    }

    @Test
    void withNoCheckPendingTheIntegrationIsNotAsked() throws Exception {
        joined.savepoint("s1");
        check("undone");
        joined.rollbackToSavepoint("s1");

        assertThat(joined.runChecks(nothingElseDue)).isFalse();
        assertThat(asked).as("no check pending: the commit rule is not asked").isZero();
    }
}
