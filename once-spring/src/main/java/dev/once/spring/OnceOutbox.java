package dev.once.spring;

import dev.once.Outbox;
import dev.once.TransactionOutbox;
import dev.once.Tx;
import dev.once.tx.TransactionHandle;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The transactional outbox as a Spring bean: inject it anywhere and call {@link #add} from any
 * {@code @Transactional} method of the {@code DataSource} {@code once} was given; the row commits or rolls
 * back with that method's transaction and a relay sends it after commit.
 *
 * <p>Inside an {@link IdempotentListener} method the rows are the delivery's own (event ids derived
 * from the consumer and the delivery's event id, exactly as {@code tx.outbox()} in a plain handler).
 * Elsewhere each transaction gets a random cause, so its rows are {@code spring:<uuid>#1},
 * {@code #2}, …: unique, and stable across relay re-sends because they are stored with the row.
 *
 * <p>The rows follow the transaction's shape: a {@code NESTED} step that rolls back to its savepoint
 * takes the rows it added with it, and a {@code REQUIRES_NEW} step's rows commit or roll back with
 * that inner transaction, never with the outer one it suspended.
 *
 * <p>Thread-safe.
 */
public final class OnceOutbox implements Outbox {

    /** The consumer name the rows written outside a listener are stamped with. */
    public static final String STANDALONE_SOURCE = "spring";

    private final OnceSpring once;

    OnceOutbox(OnceSpring once) {
        this.once = once;
    }

    /**
     * {@inheritDoc}
     *
     * @throws org.springframework.transaction.IllegalTransactionStateException outside a transaction, or in
     *         one on another {@code DataSource}: nothing is written
     */
    @Override
    public String add(
            String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException {
        Tx tx = listenerTx();
        if (tx != null) {
            return tx.outbox().add(destination, key, payload, headers, idempotencyKey);
        }
        return standalone().add(destination, key, payload, headers, idempotencyKey);
    }

    /**
     * {@inheritDoc}
     *
     * @throws org.springframework.transaction.IllegalTransactionStateException outside a transaction, or in
     *         one on another {@code DataSource}: nothing is written
     */
    @Override
    public List<String> addAll(List<Message> messages) throws SQLException {
        Tx tx = listenerTx();
        if (tx != null) {
            return tx.outbox().addAll(messages);
        }
        return standalone().addAll(messages);
    }

    /** The {@link Tx} of the listener body running in the current transaction (not a suspended one), or null. */
    private Tx listenerTx() {
        if (!TransactionSynchronizationManager.isSynchronizationActive()) {
            return null;
        }
        PhysicalTransaction state =
                PhysicalTransaction.existing(once.transactions().stateKey());
        return state == null ? null : state.listenerTx();
    }

    /**
     * The writer of the current physical transaction, which follows its savepoints and is set aside
     * while a {@code REQUIRES_NEW} step runs (see {@link PhysicalTransaction}).
     */
    private Outbox standalone() throws SQLException {
        // begin() checks there is a transaction and that it is on our DataSource; closing the joined
        // handle only gives back Spring's reference to the connection, which stays the transaction's.
        try (TransactionHandle handle = once.transactions().begin()) {
            return PhysicalTransaction.current(once.transactions().stateKey())
                    .writer(
                            this,
                            () -> TransactionOutbox.builder()
                                    .connection(handle.connection())
                                    .dialect(once.dialect())
                                    .tablePrefix(once.tablePrefix())
                                    .source(STANDALONE_SOURCE)
                                    .cause(UUID.randomUUID().toString())
                                    .clock(once.clock())
                                    .headers(once.outboxHeaders())
                                    .build());
        }
    }
}
