/**
 * The engine and its API: idempotent consumers, the transactional outbox and its relay, idempotency
 * keys, leases with fencing tokens, retention, and the transaction seam an integration implements.
 * {@code dev.once.internal} is the engine itself and is not exported.
 */
module dev.once.core {
    requires transitive java.sql;
    requires transitive micrometer.core;
    requires java.management;
    requires transitive java.net.http;
    requires org.slf4j;

    exports dev.once;
    exports dev.once.adapter;
    exports dev.once.jdbc;
    exports dev.once.keys;
    exports dev.once.lease;
    exports dev.once.outbox;
    exports dev.once.retention;
    exports dev.once.tx;

    // the transaction integrations Fence.check tells of a fence (once-spring provides one)
    uses dev.once.lease.TransactionFences;
}
