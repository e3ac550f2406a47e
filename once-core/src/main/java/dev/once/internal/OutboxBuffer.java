package dev.once.internal;

import dev.once.Outbox;
import dev.once.OutboxHeaders;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The outbox rows of one transaction, from every cause's {@link JdbcOutbox}, written together by
 * {@link #flush}: a batch of n deliveries that each add a row costs one insert, not n. Not
 * thread-safe. Not API.
 */
public final class OutboxBuffer {

    private final Connection connection;
    private final OutboxRepository repository;
    private final Clock clock;
    private final OutboxHeaders headers;
    private final List<OutboxRepository.NewRow> rows = new ArrayList<>();
    // rows written by earlier flushes; position() counts them with those still buffered
    private int flushed;

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
        rows.add(row);
        if (rows.size() >= Outbox.FLUSH_ROWS) {
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
        if (rows.isEmpty()) {
            return;
        }
        repository.insert(connection, rows, clock.instant());
        flushed += rows.size();
        rows.clear();
    }

    /** How many rows this transaction has added so far, written or not: the mark a savepoint keeps. */
    int position() {
        return flushed + rows.size();
    }

    /**
     * The transaction rolled back to a savepoint set at {@code position}: the rows added since are
     * dropped. Those a flush already wrote after the savepoint were undone by the database itself.
     * Kept in memory rather than flushed at every savepoint: a batch handler with a savepoint per
     * record would otherwise pay one insert per record instead of one per transaction.
     */
    void rollbackTo(int position) {
        if (position >= flushed) {
            rows.subList(position - flushed, rows.size()).clear();
        } else {
            rows.clear();
            flushed = position;
        }
    }
}
