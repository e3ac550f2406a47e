/**
 * The engine and its API: idempotent consumers, the transactional outbox and its relay, idempotency
 * keys, leases with fencing tokens, retention, and the transaction seam an integration implements.
 * {@code dev.once.internal} is the engine itself and is not exported; {@code dev.once.internal.fence}, the
 * seam a transaction integration implements for {@code Fence.check}, is exported to once-spring only.
 */
// "module": the qualified export names dev.once.spring, which is built after this module and so not found here
@SuppressWarnings("module")
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

    // Not API: the fence seam once-spring implements (a qualified export, so that no other module
    // compiles against it; on the class path the package is reachable like any, and documented as internal)
    exports dev.once.internal.fence to
            dev.once.spring;

    // the transaction integrations Fence.check tells of a fence (once-spring provides one)
    uses dev.once.internal.fence.TransactionFences;
}
