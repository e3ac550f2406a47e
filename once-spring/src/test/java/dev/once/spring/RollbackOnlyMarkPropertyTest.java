package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A failed delivery marks the caller's whole Spring transaction rollback-only, whatever else the transaction
 * has bound beside once's connection and state: random sequences, in one {@code JdbcTransactionManager}
 * transaction, of taking a second {@code DataSource}'s connection ({@code DataSourceUtils}, as a
 * {@code JdbcTemplate} on it does), binding a holder of the caller's own, and deliveries that apply or fail.
 * The oracle: after a failed delivery, every holder bound before it is rollback-only (once cannot tell which
 * transaction manager reads which) and the transaction rolls back; without one nothing is marked and it
 * commits. A rollback-only shortcut that marks once's connection alone when once's own resources are bound
 * fails here as soon as another is bound too.
 */
class RollbackOnlyMarkPropertyTest {

    private static TestDatabase db;
    private static TestDatabase other;
    private static JdbcTransactionManager tm;
    private static IdempotentConsumer consumer;
    private static final AtomicLong ids = new AtomicLong();

    enum Move {
        OTHER_DATASOURCE,
        CALLERS_HOLDER,
        APPLY,
        FAIL
    }

    @AfterContainer
    static void stop() {
        if (db != null) {
            db.close();
            other.close();
        }
    }

    @Provide
    Arbitrary<List<Move>> moves() {
        return Arbitraries.of(Move.class).list().ofMinSize(1).ofMaxSize(8);
    }

    @Property(tries = 40)
    void aFailedDeliveryMarksEveryResourceBoundBeforeIt(@ForAll("moves") List<Move> moves) {
        if (db == null) {
            db = TestPostgres.shared().freshDatabase(2);
            other = TestPostgres.shared().freshDatabase(1);
            db.execute("CREATE TABLE ledger (event_id text NOT NULL)");
            tm = new JdbcTransactionManager(db.dataSource());
            OnceSpring once = OnceSpring.builder()
                    .dataSource(db.dataSource())
                    .transactionManager(tm)
                    .build();
            JdbcTemplate jdbc = new JdbcTemplate(db.dataSource());
            consumer = once.consumer("marks", (d, tx) -> {
                jdbc.update("INSERT INTO ledger VALUES (?)", d.eventId());
                if (d.payloadText().equals("fail")) {
                    throw new IllegalStateException("delivery fails");
                }
            });
        }
        boolean fails = moves.contains(Move.FAIL);
        List<String> applied = new ArrayList<>();
        Runnable body = () -> {
            List<ResourceHolderSupport> boundBeforeFailure = new ArrayList<>();
            List<Object> callersKeys = new ArrayList<>();
            boolean failed = false;
            for (Move move : moves) {
                switch (move) {
                    case OTHER_DATASOURCE -> {
                        DataSourceUtils.getConnection(other.dataSource());
                        if (!failed) {
                            boundBeforeFailure.add((ConnectionHolder)
                                    TransactionSynchronizationManager.getResource(other.dataSource()));
                        }
                    }
                    case CALLERS_HOLDER -> {
                        Object key = new Object();
                        ResourceHolderSupport holder = new ResourceHolderSupport() {};
                        TransactionSynchronizationManager.bindResource(key, holder);
                        callersKeys.add(key);
                        if (!failed) {
                            boundBeforeFailure.add(holder);
                        }
                    }
                    case APPLY, FAIL -> {
                        String id = "e" + ids.incrementAndGet();
                        Outcome o = consumer.process(Delivery.of(id, move == Move.FAIL ? "fail" : "ok"));
                        assertThat(o.status())
                                .isEqualTo(
                                        move == Move.FAIL ? Outcome.Status.FAILED_RETRYABLE : Outcome.Status.APPLIED);
                        if (move == Move.APPLY) {
                            applied.add(id);
                        }
                        failed |= move == Move.FAIL;
                    }
                }
            }
            boundBeforeFailure.add((ConnectionHolder) TransactionSynchronizationManager.getResource(db.dataSource()));
            for (ResourceHolderSupport holder : boundBeforeFailure) {
                assertThat(holder.isRollbackOnly())
                        .as("%s rollback-only after %s", holder.getClass().getSimpleName(), moves)
                        .isEqualTo(failed);
            }
            callersKeys.forEach(TransactionSynchronizationManager::unbindResource);
        };
        TransactionTemplate tt = new TransactionTemplate(tm);
        if (fails) {
            assertThatThrownBy(() -> tt.executeWithoutResult(s -> body.run()))
                    .as("%s", moves)
                    .isInstanceOf(UnexpectedRollbackException.class);
        } else {
            tt.executeWithoutResult(s -> body.run());
        }
        assertThat(TransactionSynchronizationManager.getResourceMap())
                .as("nothing left bound")
                .isEmpty();
        for (String id : applied) {
            assertThat(db.queryLong("SELECT count(*) FROM ledger WHERE event_id = '" + id + "'"))
                    .as("%s after %s", id, moves)
                    .isEqualTo(fails ? 0 : 1);
        }
    }
}
