package dev.once.bench;

import java.sql.SQLException;
import java.util.List;
import javax.sql.DataSource;

/**
 * A consumer under test: {@code once} or a peer, wired the way its documentation shows, applying
 * {@link Ledger#CREDIT} with its dedupe store on the same PostgreSQL.
 *
 * <p>{@link #deliver} returning true is the point where the broker would be acknowledged; false
 * or an exception leaves the event unacknowledged, so the harness redelivers it.
 */
interface Subject extends AutoCloseable {

    boolean deliver(Event event) throws Exception;

    /** Delivers a batch in one call, where the subject has a batch API; else one by one. */
    default List<Boolean> deliverBatch(List<Event> events) throws Exception {
        List<Boolean> acks = new java.util.ArrayList<>(events.size());
        for (Event e : events) {
            acks.add(deliver(e));
        }
        return acks;
    }

    @Override
    default void close() throws SQLException {}

    /** How to set up and open one kind of subject on a fresh database. */
    interface Kind {
        /** The name in BENCH and CORRECTNESS lines. */
        String name();

        /** What is used and how, for the report: artifact, version, classes, transaction shape. */
        String description();

        /** Creates the subject's dedupe store in the (fresh) schema the data source points at. */
        void createStore(DataSource dataSource) throws Exception;

        /** A new subject instance: a process start. Its in-memory state, if any, starts empty. */
        Subject open(DataSource dataSource) throws Exception;

        default boolean batches() {
            return false;
        }
    }
}
