package dev.once.testkit.fault;

/**
 * What a {@link FaultProxy} understands of the bytes it forwards. Only {@link #POSTGRES} and
 * {@link #MARIADB} let it find a transaction's {@code COMMIT} and fail it ({@link CommitFault});
 * every protocol supports freeze, reset and latency.
 */
public enum WireProtocol {
    /** Opaque bytes (AMQP, Kafka, anything): no commit faults. */
    RAW,
    /**
     * PostgreSQL frontend/backend protocol 3.0: a commit is the simple query {@code COMMIT} or a
     * Bind of a statement parsed from {@code COMMIT} (pgjdbc names it after the first use); its
     * reply is CommandComplete with the tag {@code COMMIT}. After an accepted SSL or GSS request
     * the stream is encrypted and treated as {@link #RAW}.
     */
    POSTGRES,
    /**
     * MariaDB/MySQL client/server protocol without compression or TLS: a commit is a
     * {@code COM_QUERY} packet whose text is {@code COMMIT}; its reply is the OK packet that follows.
     */
    MARIADB
}
