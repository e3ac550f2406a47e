package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outbox;
import dev.once.Tx;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Clock;

/** The {@link Tx} of one claim transaction. Not API. */
public final class DefaultTx extends ClaimTx implements Tx {

    private final Delivery delivery;
    private final OnceMetrics metrics;
    private JdbcOutbox outbox;

    public DefaultTx(
            Connection raw,
            Dialect dialect,
            String prefix,
            String consumer,
            Delivery delivery,
            Clock clock,
            OnceMetrics metrics) {
        super(raw, dialect, prefix, consumer, clock);
        this.delivery = delivery;
        this.metrics = metrics;
    }

    @Override
    public Delivery delivery() {
        return delivery;
    }

    @Override
    public Outbox outbox() {
        if (outbox == null) {
            outbox = new JdbcOutbox(raw, dialect, prefix, consumer, delivery.eventId(), clock);
        }
        return outbox;
    }

    /** Writes the outbox rows the handler added; the engine calls it when the handler returns. */
    public void flushOutbox() throws SQLException {
        if (outbox != null) {
            outbox.flush();
        }
    }

    @Override
    public boolean transition(String table, Object id, String from, String to) throws SQLException {
        return transition(table, "id", id, "status", from, to);
    }

    @Override
    public boolean transition(String table, String idColumn, Object id, String statusColumn, String from, String to)
            throws SQLException {
        String sql = dialect.transition(Names.table(table), Names.column(idColumn), Names.column(statusColumn));
        try (PreparedStatement ps = raw.prepareStatement(sql)) {
            ps.setString(1, to); // 1 new status
            ps.setObject(2, id); // 2 row id
            ps.setString(3, from); // 3 expected current status
            return ps.executeUpdate() == 1;
        }
    }

    OnceMetrics metrics() {
        return metrics;
    }
}
