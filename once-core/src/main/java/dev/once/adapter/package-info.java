/**
 * The one loop every broker adapter runs: receive a batch, decode each message's event id
 * (an undecodable message is a permanent failure, dead-lettered by the adapter's rule), run the
 * batch through {@link dev.once.IdempotentConsumer#processBatch}, keep long work from being
 * redelivered (heartbeat), and settle each message by its {@link dev.once.adapter.Verdict}. An
 * adapter implements {@link dev.once.adapter.Broker} with what its broker makes different (how to
 * read a message, how to ack, requeue and dead-letter); the rule "acknowledge only what
 * {@link dev.once.Outcome#shouldAcknowledge()} says" lives in {@link dev.once.adapter.Verdict}.
 * Imports no broker client.
 */
package dev.once.adapter;
