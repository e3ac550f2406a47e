package dev.once;

import dev.once.internal.JdbcOutbox;
import dev.once.internal.Names;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.TablePrefix;
import dev.once.tx.SavepointListener;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.List;
import java.util.Map;

/**
 * An outbox writing on a connection whose transaction the caller owns (plain JDBC, Spring's
 * {@code @Transactional}, jOOQ): the rows commit or roll back with that transaction, and a relay
 * sends them after commit. It never commits, rolls back or closes the connection.
 *
 * <pre>{@code
 * TransactionOutbox outbox = TransactionOutbox.builder()
 *         .connection(connection).dialect(dialect).source("orders").cause(orderId).build();
 * outbox.add("orders.placed", orderId, payload, Map.of(), null);
 * outbox.flush();          // before the caller commits: rows are buffered until then
 * connection.commit();
 * }</pre>
 *
 * <p>Rows get event ids {@code <source>:<cause>#<n>}, exactly as a handler's {@link Tx#outbox()}
 * (see {@link Outbox}): use one instance per transaction, and a cause that is unique per
 * transaction of one source (a random UUID when nothing better identifies it). Savepoints: tell it
 * of each ({@link SavepointListener}), or a row added under a savepoint the transaction rolls back
 * to is still written. Not thread-safe: it belongs to the transaction's thread.
 */
public final class TransactionOutbox implements Outbox, SavepointListener {

    private final JdbcOutbox rows;

    private TransactionOutbox(Builder b) {
        this.rows = new JdbcOutbox(b.connection, b.dialect, b.tablePrefix, b.source, b.cause, b.clock, b.headers);
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public String add(
            String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException {
        return rows.add(destination, key, payload, headers, idempotencyKey);
    }

    @Override
    public List<String> addAll(List<Message> messages) throws SQLException {
        return rows.addAll(messages);
    }

    /**
     * Writes the rows added since the last flush, in one statement, on the connection. Call it before
     * the transaction commits; rows still buffered at commit are lost with this object.
     */
    public void flush() throws SQLException {
        rows.flush();
    }

    /**
     * A savepoint was set on the transaction: rows added from now on are dropped by a rollback to it.
     * Call it after the savepoint exists (Spring's {@code TransactionSynchronization.savepoint} does).
     */
    @Override
    public void savepoint(Object savepoint) {
        rows.buffer().savepoint(savepoint);
    }

    /**
     * The transaction rolled back to {@code savepoint}: the rows added since are dropped, and rows a
     * flush wrote after it (undone by the database) are buffered again if they were added before it.
     * A savepoint never announced is taken as one set before this outbox: everything it added is undone.
     */
    @Override
    public void rollbackToSavepoint(Object savepoint) {
        rows.buffer().rollbackToSavepoint(savepoint);
    }

    @Override
    public void releaseSavepoint(Object savepoint) {
        rows.buffer().releaseSavepoint(savepoint);
    }

    /** Builds a {@link TransactionOutbox}; {@code connection}, {@code dialect}, {@code source} and {@code cause} are required. Not thread-safe. */
    public static final class Builder {
        private Connection connection;
        private Dialect dialect;
        private String tablePrefix = TablePrefix.DEFAULT;
        private String source;
        private String cause;
        private Clock clock = Clock.systemUTC();
        private OutboxHeaders headers = OutboxHeaders.NONE;

        private Builder() {}

        /** The connection of the caller's open transaction (auto-commit off). Required. */
        public Builder connection(Connection connection) {
            this.connection = connection;
            return this;
        }

        /** The database's dialect ({@code Dialects.detect}). Required. */
        public Builder dialect(Dialect dialect) {
            this.dialect = dialect;
            return this;
        }

        /** The prefix of once's tables; {@value TablePrefix#DEFAULT} by default. */
        public Builder tablePrefix(String tablePrefix) {
            this.tablePrefix = tablePrefix;
            return this;
        }

        /** The name rows are stamped with, as a consumer name (letters, digits, {@code . _ -}). Required. */
        public Builder source(String source) {
            this.source = source;
            return this;
        }

        /** What caused this transaction's rows, unique per transaction of one source. Required. */
        public Builder cause(String cause) {
            this.cause = cause;
            return this;
        }

        /** The clock rows are timestamped with; the UTC system clock by default. */
        public Builder clock(Clock clock) {
            this.clock = clock;
            return this;
        }

        /** Headers added to every row at add time (a trace context); none by default. */
        public Builder headers(OutboxHeaders headers) {
            this.headers = headers;
            return this;
        }

        /**
         * @throws InvalidConfigurationException naming the first missing or invalid value
         */
        public TransactionOutbox build() {
            if (connection == null) {
                throw new InvalidConfigurationException("connection is required (the caller's open transaction)");
            }
            try {
                if (connection.getAutoCommit()) {
                    throw new InvalidConfigurationException("connection must be in a transaction (auto-commit off),"
                            + " or each row would commit on its own");
                }
            } catch (SQLException e) {
                throw new InvalidConfigurationException("connection cannot be used: " + e.getMessage());
            }
            if (dialect == null) {
                throw new InvalidConfigurationException("dialect is required (Dialects.detect)");
            }
            TablePrefix.validate(tablePrefix);
            try {
                Names.consumer(source);
            } catch (InvalidConfigurationException e) {
                throw new InvalidConfigurationException("source: " + e.getMessage());
            }
            if (cause == null || cause.isBlank() || cause.indexOf('\0') >= 0 || Names.unpairedSurrogate(cause) >= 0) {
                throw new InvalidConfigurationException(
                        "cause must be non-blank well-formed text without NUL, but was " + Names.quoted(cause));
            }
            if (clock == null) {
                throw new InvalidConfigurationException("clock must not be null");
            }
            if (headers == null) {
                throw new InvalidConfigurationException("headers must not be null (OutboxHeaders.NONE for none)");
            }
            return new TransactionOutbox(this);
        }
    }
}
