package dev.once.internal;

import dev.once.Outbox;
import dev.once.OutboxHeaders;
import dev.once.jdbc.Dialect;
import dev.once.tx.SavepointListener;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The outbox rows of one transaction, from every cause's {@link JdbcOutbox}, written together by
 * {@link #flush}: a batch of n deliveries that each add a row costs one insert, not n. Follows the
 * transaction's savepoints ({@link SavepointListener}): what a rollback to a savepoint undoes in the
 * database is undone here too, so no row added under a rolled-back savepoint is ever sent. Not
 * thread-safe. Not API.
 */
public final class OutboxBuffer implements SavepointListener {

    private final Connection connection;
    private final OutboxRepository repository;
    private final Clock clock;
    private final OutboxHeaders headers;
    // NO_ROWS until the first row: most claim transactions add none, and the engine makes a buffer for each
    private List<OutboxRepository.NewRow> rows = NO_ROWS;
    private static final List<OutboxRepository.NewRow> NO_ROWS = List.of();

    public OutboxBuffer(Connection connection, Dialect dialect, String prefix, Clock clock, OutboxHeaders headers) {
        this(connection, new OutboxRepository(dialect, prefix), clock, headers);
    }

    /**
     * On a repository the caller keeps: the engine makes one buffer per claim transaction, and
     * building the repository's statements each time was a measurable share of a one-event
     * transaction's client CPU (eleven SQL strings per event, issue 21).
     */
    public OutboxBuffer(Connection connection, OutboxRepository repository, Clock clock, OutboxHeaders headers) {
        this.connection = connection;
        this.repository = repository;
        this.clock = clock;
        this.headers = headers;
    }

    /** {@code given} with the {@link OutboxHeaders} hook's headers added; the caller's win on a clash. */
    Map<String, String> withHookHeaders(Map<String, String> given) {
        Map<String, String> extra = headers.current();
        if (extra == null || extra.isEmpty()) {
            return given;
        }
        Map<String, String> all = new LinkedHashMap<>(extra);
        if (given != null) {
            all.putAll(given);
        }
        return all;
    }

    /** Buffers a row; a transaction this large writes what it holds now, to bound the memory it keeps. */
    void add(OutboxRepository.NewRow row) throws SQLException {
        if (rows == NO_ROWS) {
            rows = new ArrayList<>();
        }
        rows.add(row);
        if (base + rows.size() - written >= Outbox.FLUSH_ROWS) {
            flush();
        }
    }

    /**
     * Writes what was buffered since the last flush, in one statement, on the transaction's
     * connection; the engine calls it once, after the handler returned and before the claim commits.
     * Writing at the end, after everything the handlers locked, is also what keeps a key's ids in
     * commit order: two transactions serialized by a lock (the same account row) get their ids in
     * the order they commit.
     */
    public void flush() throws SQLException {
        int end = base + rows.size();
        if (written == end) {
            return;
        }
        repository.insert(connection, rows.subList(written - base, rows.size()), clock.instant());
        written = end;
        trim();
    }

    // Rows are numbered from 0 in the order added; rows.get(i) is row base + i. Rows [0, written) are
    // in the database. A row stays in memory after it is written while a live savepoint was set
    // before it was written: a rollback to that savepoint undoes the write, and the row (if it was
    // added before the savepoint) must be written again.
    // Created by the first savepoint: most claim transactions set none, and the engine makes a
    // buffer per transaction (issue 21: an empty IdentityHashMap still allocates its table).
    private List<Mark> live;
    private Map<Object, Mark> marks;
    private int base;
    private int written;

    /**
     * Where the buffer stood when a savepoint was set: rows added, and rows written. Compared by
     * identity (a class, not a record): two savepoints set with nothing added between them have equal
     * positions and must still be told apart, or releasing the inner one forgets the outer one.
     */
    private static final class Mark {
        private final int added;
        private final int written;

        Mark(int added, int written) {
            this.added = added;
            this.written = written;
        }

        int added() {
            return added;
        }

        int written() {
            return written;
        }
    }

    /**
     * A savepoint was set (on the handler's guarded connection, or announced by the joined
     * transaction): its position is kept, in memory. Not flushed: a batch handler with a savepoint per
     * record would otherwise pay one insert per record instead of one per transaction.
     */
    @Override
    public void savepoint(Object savepoint) {
        Mark m = new Mark(base + rows.size(), written);
        if (live == null) {
            live = new ArrayList<>(2);
            marks = new IdentityHashMap<>(2);
        }
        live.add(m);
        marks.put(savepoint, m);
    }

    /**
     * The transaction rolled back to {@code savepoint}: rows added since are dropped, and rows the
     * database held at the savepoint are all it holds now (a row added before it but written after it
     * is buffered again). A savepoint this buffer never heard of was set before the buffer existed:
     * everything the buffer holds or wrote is undone.
     */
    @Override
    public void rollbackToSavepoint(Object savepoint) {
        Mark m = marks == null ? null : marks.get(savepoint);
        if (m == null || !live.contains(m)) {
            m = new Mark(0, 0);
            if (live != null) {
                live.clear();
            }
        } else {
            live.subList(live.indexOf(m) + 1, live.size()).clear();
        }
        if (m.added() >= base) {
            if (m.added() < base + rows.size()) {
                rows.subList(m.added() - base, rows.size()).clear();
            }
        } else {
            // Only a savepoint set before this buffer (Mark(0, 0)): the rows written and trimmed since
            // were undone with everything else, and none of them is to be written again.
            rows = NO_ROWS;
            base = m.added();
        }
        written = Math.min(written, m.written());
        if (written < base) {
            // Cannot happen while trim() keeps every row a live mark may need; refuse to lose rows silently.
            throw new IllegalStateException("outbox rows " + written + ".." + base + " were undone but not kept");
        }
        trim();
    }

    @Override
    public void releaseSavepoint(Object savepoint) {
        Mark m = marks == null ? null : marks.remove(savepoint);
        if (m != null && live.contains(m)) {
            live.subList(live.indexOf(m), live.size()).clear();
            trim();
        }
    }

    // Drops written rows no live savepoint can bring back.
    private void trim() {
        int keep = written;
        if (live != null) {
            for (Mark m : live) {
                keep = Math.min(keep, m.written());
            }
        }
        if (keep > base) {
            rows.subList(0, keep - base).clear();
            base = keep;
        }
    }
}
