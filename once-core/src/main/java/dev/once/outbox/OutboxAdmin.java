package dev.once.outbox;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import dev.once.internal.OutboxRepository;
import dev.once.jdbc.JdbcBuilder;
import java.sql.SQLException;
import java.util.Collection;
import java.util.List;
import java.util.Objects;

/**
 * What an operator does with the outbox: see how far behind it is, list the rows the relay gave up
 * on ({@code dead}), and send them again once the cause is fixed.
 *
 * <pre>{@code
 * OutboxAdmin admin = OutboxAdmin.builder().dataSource(ds).build();
 * for (DeadMessage d : admin.dead(0, 100)) log(d.message().id(), d.lastError());
 * admin.replay(List.of(42L, 43L));
 * }</pre>
 *
 * <p>A dead row holds back the rows of its key written after it, so per-key order survives a dead
 * letter: replay it (it goes back to {@code pending} with its attempts reset, and a running relay
 * sends it first at its next poll; PostgreSQL wakes relays at once) or discard it.
 *
 * <p>Immutable and thread-safe; reads are one short statement, replay and discard one transaction.
 */
public final class OutboxAdmin {

    private final JdbcTarget target;
    private final OutboxRepository repository;

    private OutboxAdmin(JdbcTarget target) {
        this.target = target;
        this.repository = new OutboxRepository(target.dialect(), target.tablePrefix());
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Pending rows, the age of the oldest one (lag) and dead rows.
     *
     * @throws OnceException if the database fails
     */
    public OutboxStats stats() {
        try {
            return target.inTransaction(c -> repository.stats(c, target.clock().instant()));
        } catch (SQLException e) {
            throw new OnceException("reading outbox stats failed: " + e.getMessage(), e);
        }
    }

    /**
     * Dead rows with an id above {@code afterId}, in id order: page with the last id seen.
     *
     * @param limit 1 to 10000
     */
    public List<DeadMessage> dead(long afterId, int limit) {
        if (limit < 1 || limit > 10_000) {
            throw new IllegalArgumentException("limit must be between 1 and 10000, but was " + limit);
        }
        try {
            return target.inTransaction(c -> repository.dead(c, afterId, limit));
        } catch (SQLException e) {
            throw new OnceException("listing dead outbox rows failed: " + e.getMessage(), e);
        }
    }

    /**
     * Sends dead rows again, in one transaction: each goes back to {@code pending}, attempts reset,
     * available now, and as the head of its key it is sent before the rows of its key written after it.
     * Ids that are not dead (already replayed, sent, unknown) are skipped.
     *
     * @return how many rows were replayed
     */
    public int replay(Collection<Long> ids) {
        Objects.requireNonNull(ids, "ids");
        try {
            return target.inTransaction(
                    c -> repository.replay(c, ids, target.clock().instant()));
        } catch (SQLException e) {
            throw new OnceException("replaying dead outbox rows failed, none replayed: " + e.getMessage(), e);
        }
    }

    /**
     * Deletes dead rows without sending them, in one transaction, which frees the rows of their keys
     * written after them. Ids that are not dead are skipped.
     *
     * @return how many rows were discarded
     */
    public int discard(Collection<Long> ids) {
        Objects.requireNonNull(ids, "ids");
        try {
            return target.inTransaction(c -> repository.discard(c, ids));
        } catch (SQLException e) {
            throw new OnceException("discarding dead outbox rows failed, none discarded: " + e.getMessage(), e);
        }
    }

    /** Builds an {@link OutboxAdmin}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends JdbcBuilder<Builder> {

        private Builder() {}

        @Override
        protected Builder self() {
            return this;
        }

        /** @throws InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public OutboxAdmin build() {
            return new OutboxAdmin(JdbcTarget.of(settings()));
        }
    }
}
