package dev.once.outbox;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.internal.JdbcSettings;
import dev.once.internal.JdbcTarget;
import dev.once.jdbc.Dialect;

import javax.sql.DataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
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
 * <p>A replayed row goes back to {@code pending} with its attempts reset; a running relay picks it
 * up at its next poll (PostgreSQL wakes relays at once). A dead row no longer holds back the later
 * rows of its key, so a replayed row is sent after them, out of its original order.
 *
 * <p>Immutable and thread-safe; every call is one short auto-commit statement per row.
 */
public final class OutboxAdmin {

    private final DataSource dataSource;
    private final Clock clock;
    private final String statsSql;
    private final String deadSql;
    private final String replaySql;

    private OutboxAdmin(DataSource dataSource, Dialect dialect, String prefix, Clock clock) {
        this.dataSource = dataSource;
        this.clock = clock;
        this.statsSql = dialect.outboxStats(prefix);
        this.deadSql = dialect.outboxListDead(prefix);
        this.replaySql = dialect.outboxReplay(prefix);
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
        try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(statsSql);
             ResultSet rs = ps.executeQuery()) {
            rs.next();
            long pending = rs.getLong(1);
            Timestamp oldest = rs.getTimestamp(2);
            long dead = rs.getLong(3);
            Duration lag = oldest == null ? Duration.ZERO : Duration.between(oldest.toInstant(), clock.instant());
            return new OutboxStats(pending, lag.isNegative() ? Duration.ZERO : lag, dead);
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
        List<DeadMessage> result = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(deadSql)) {
            ps.setLong(1, afterId);                                  // 1 after id
            ps.setInt(2, limit);                                     // 2 limit
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    result.add(new DeadMessage(Rows.message(rs), rs.getString(10), rs.getInt(11)));
                }
            }
        } catch (SQLException e) {
            throw new OnceException("listing dead outbox rows failed: " + e.getMessage(), e);
        }
        return result;
    }

    /**
     * Sends dead rows again: each goes back to {@code pending}, attempts reset, available now.
     * Ids that are not dead (already replayed, sent, unknown) are skipped.
     *
     * @return how many rows were replayed
     */
    public int replay(Collection<Long> ids) {
        Objects.requireNonNull(ids, "ids");
        int replayed = 0;
        try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(replaySql)) {
            if (!c.getAutoCommit()) {
                c.setAutoCommit(true);
            }
            for (long id : ids) {
                ps.setTimestamp(1, Timestamp.from(clock.instant()));   // 1 available_at
                ps.setLong(2, id);                                      // 2 id
                replayed += ps.executeUpdate();
            }
        } catch (SQLException e) {
            throw new OnceException("replaying dead outbox rows failed after " + replayed + ": " + e.getMessage(), e);
        }
        return replayed;
    }

    /** Builds an {@link OutboxAdmin}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends JdbcSettings<Builder> {

        private Builder() {
        }

        @Override
        protected Builder self() {
            return this;
        }

        /** @throws InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public OutboxAdmin build() {
            JdbcTarget t = target();
            return new OutboxAdmin(t.dataSource(), t.dialect(), t.tablePrefix(), t.clock());
        }
    }

}
