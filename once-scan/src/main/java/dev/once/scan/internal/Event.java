package dev.once.scan.internal;

import dev.once.scan.Blast;
import dev.once.scan.Location;
import dev.once.scan.Step;
import java.util.List;

/**
 * Something the traced flow of an entry point does, in execution order ({@code seq}).
 *
 * @param tx    id of the database transaction open at this point, null when none is
 * @param keyed an external effect that carries an idempotency key or a stable event id
 * @param handedOff where the work was handed to another thread (an executor, a reactive
 *     {@code subscribe()}) that the handler does not wait for; null when it runs in the handler
 * @param arms the branches taken on the way here (see {@link #exclusiveWith})
 */
record Event(
        Kind kind,
        int seq,
        Location location,
        List<Step> path,
        Blast blast,
        Category category,
        String what,
        Integer tx,
        Location txLocation,
        boolean keyed,
        String member,
        Location handedOff,
        List<Long> arms) {

    /**
     * The two happen on different branches of one if/else, switch or early exit ({@code arms}: each branch
     * the flow took on its way here, as branch id and arm), so neither comes before the other on any run.
     */
    boolean exclusiveWith(Event other) {
        for (long a : arms) {
            for (long b : other.arms) {
                if (a >> 8 == b >> 8 && a != b) {
                    return true;
                }
            }
        }
        return false;
    }

    enum Kind {
        EFFECT,
        ACK,
        CLAIM,
        ONCE,
        GUARD,
        CHECK,
        REMOTE,
        SLOW,
        SELF_INVOCATION,
        EOS,
        OUTBOX,
        WEAK,
        /** Work handed to another thread, not waited for: {@code executor.submit}, {@code runAsync}, {@code subscribe()}. */
        ASYNC,
        /**
         * The message handed to an in-process buffer that a later stage drains on its own schedule: a Flux sink's
         * {@code next}, a blocking queue's {@code offer}, a write to a temp file uploaded later. An ack after it in
         * the same method acknowledges work not done yet ({@link #WAIT}: the buffer drained first).
         */
        BUFFER,
        /**
         * A batch send whose per-entry failures the code never reads ({@code sqs.sendMessageBatch(…)} and not its
         * {@code failed()}): an entry the service refused is dropped while the message behind it is acknowledged.
         */
        DROPPED,
        /**
         * A publish that does not wait for the broker to store it: reactor-rabbitmq's {@code Sender.send} (no
         * publisher confirm; {@code sendWithPublishConfirms} waits for one). An ack after it can outlive the message.
         */
        UNCONFIRMED,
        /**
         * A reactor {@code timeout(…)}: it cancels the subscription, not the work already running under it, which
         * completes all the same.
         */
        TIMEOUT,
        /** A reactor {@code retry}/{@code retryWhen}, or a failure handler that publishes the message again. */
        RETRIES,
        /**
         * An acknowledgement of the source the code makes for more than the runtime has confirmed (a Kafka Connect
         * {@code SourceTask.commit()} completing every job in flight): {@code what} says why it is early.
         */
        EARLY_ACK,
        /** The handler waits for handed-off work ({@code get()}, {@code join()}, {@code await()} with its result checked). */
        WAIT,
        /**
         * An arm that leaves the message unacknowledged to have it redelivered, beside one that acknowledges by hand,
         * or a catch of every exception that only logs, in a listener whose container acknowledges on return all the
         * same: a failed message is consumed.
         */
        REQUEUE_IGNORED,
        /**
         * A catch of every exception that only logs and returns as the method's normal path does, before work that
         * follows its try statement: the message is reported done (acknowledged on return, or by an ack after it)
         * while that work never ran.
         */
        RETURNED_EARLY,
        /**
         * A check by a list lookup whose emptiness picks the arm that writes: its last arm is that arm, and it checks
         * only the effects made on it.
         */
        LOOKUP,
        /**
         * A dedupe record (a processed-events row) written by a save that merges rather than fails on a repeat: no
         * claim, but a record a redelivery is checked against all the same.
         */
        MARK,
        /** A call into a REQUIRES_NEW transaction while another is open ({@code tx} is the outer one). */
        NESTED,
        /**
         * The message's data handed to code the repository does not hold under a verb that does work
         * ({@code hooks.doIndex(event, body)}, {@code processor.process(release)}; {@link WorkVerbs}): no effect of its
         * own, since what that code writes is not in sight, but work whose failure is the message's failure.
         */
        WORK
    }

    /** Where an effect lands: the consumer's database, a remote system, a broker, a cache. */
    enum Category {
        DATABASE,
        EXTERNAL,
        PUBLISH,
        CACHE
    }
}
