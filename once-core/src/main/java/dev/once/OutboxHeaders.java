package dev.once;

import java.util.Map;

/**
 * Headers added to every outbox row at {@link Outbox#add} time, on the adding thread: the hook a
 * tracing integration uses to store the caller's trace context ({@code traceparent}) with the row,
 * so that what the relay sends later still names the request that caused it. Core ships no
 * implementation and depends on no tracing library.
 *
 * <p>A header the caller passed to {@code add} wins over one of the same name returned here, and
 * the event id headers are always the outbox's own. Implementations must be thread-safe and fast:
 * they run once per row.
 */
@FunctionalInterface
public interface OutboxHeaders {

    /** Adds nothing. */
    OutboxHeaders NONE = Map::of;

    /**
     * The headers to store with the row being added now.
     *
     * @return never null; empty for none
     */
    Map<String, String> current();
}
