package dev.once.spring;

import dev.once.OnceException;
import dev.once.Outbox;
import dev.once.TransactionOutbox;
import dev.once.Tx;
import dev.once.tx.TransactionHandle;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.springframework.transaction.support.TransactionSynchronization;
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
        Tx tx = IdempotentListenerInterceptor.currentTx();
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
        Tx tx = IdempotentListenerInterceptor.currentTx();
        if (tx != null) {
            return tx.outbox().addAll(messages);
        }
        return standalone().addAll(messages);
    }

    /** One writer per Spring transaction, bound to it, so the rows of one transaction are numbered #1, #2, … */
    private Outbox standalone() throws SQLException {
        Object bound = TransactionSynchronizationManager.getResource(this);
        if (bound instanceof Outbox writer) {
            return writer;
        }
        TransactionOutbox writer;
        // begin() checks there is a transaction and that it is on our DataSource; closing the joined
        // handle only gives back Spring's reference to the connection, which stays the transaction's.
        try (TransactionHandle handle = once.transactions().begin()) {
            writer = TransactionOutbox.builder()
                    .connection(handle.connection())
                    .dialect(once.dialect())
                    .tablePrefix(once.tablePrefix())
                    .source(STANDALONE_SOURCE)
                    .cause(UUID.randomUUID().toString())
                    .clock(once.clock())
                    .headers(once.outboxHeaders())
                    .build();
        }
        TransactionSynchronizationManager.bindResource(this, writer);
        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
            // The writer buffers its rows; they are written in one statement before the commit, so a
            // failure to write them rolls the whole transaction back (all or nothing).
            @Override
            public void beforeCommit(boolean readOnly) {
                try {
                    writer.flush();
                } catch (SQLException e) {
                    throw new OnceException("writing the transaction's outbox rows failed: " + e.getMessage(), e);
                }
            }

            @Override
            public void afterCompletion(int status) {
                TransactionSynchronizationManager.unbindResourceIfPossible(OnceOutbox.this);
            }
        });
        return writer;
    }
}
