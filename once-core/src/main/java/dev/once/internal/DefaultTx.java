package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outbox;
import dev.once.Tx;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Clock;

/**
 * The {@link Tx} of one delivery in a claim transaction; its outbox rows go to the transaction's
 * {@link OutboxBuffer}, which the engine flushes once for all the transaction's deliveries. Not API.
 */
public final class DefaultTx extends ClaimTx implements Tx {

    private final Delivery delivery;
    private JdbcOutbox outbox;

    // What the watch and the engine hold is read from them, not copied into fields: one of these per delivery.
    public DefaultTx(Connection raw, ClaimWatch watch, String prefix, String consumer, Delivery delivery, Clock clock) {
        super(raw, watch, prefix, consumer, clock);
        this.delivery = delivery;
    }

    @Override
    public Delivery delivery() {
        return delivery;
    }

    @Override
    public Outbox outbox() {
        if (outbox == null) {
            outbox = new JdbcOutbox(watch.outbox(), consumer, delivery.eventId());
        }
        return outbox;
    }

    @Override
    public boolean transition(String table, Object id, String from, String to) throws SQLException {
        return transition(table, "id", id, "status", from, to);
    }

    @Override
    public boolean transition(String table, String idColumn, Object id, String statusColumn, String from, String to)
            throws SQLException {
        String sql = watch.dialect().transition(Names.table(table), Names.column(idColumn), Names.column(statusColumn));
        try (PreparedStatement ps = raw.prepareStatement(sql)) {
            ps.setString(1, to); // 1 new status
            ps.setObject(2, id); // 2 row id
            ps.setString(3, from); // 3 expected current status
            return ps.executeUpdate() == 1;
        } catch (SQLException e) {
            throw watch.failed(e); // on the raw connection, so the guard would not see it
        }
    }
}
