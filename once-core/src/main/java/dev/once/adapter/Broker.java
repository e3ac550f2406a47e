package dev.once.adapter;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import java.util.List;

/**
 * What one broker makes different, for the {@link AdapterDriver}: how a message becomes a
 * {@link Delivery} (where the event id and the redelivery count are), and how it is
 * acknowledged, left for redelivery and dead-lettered. Called from the driver's threads; an
 * implementation used with several receive threads must be thread-safe.
 *
 * @param <M> the broker's message type
 */
public interface Broker<M> {

    /**
     * The delivery of {@code message}.
     *
     * @throws InvalidDeliveryException when it carries no usable event id: the driver makes it a
     *                                  permanent failure and the adapter dead-letters it by its rule
     */
    Delivery delivery(M message);

    /** A short name of the message for logs and for the outcome of an undecodable one: a delivery tag, a sequence. */
    String describe(M message);

    /**
     * Settles processed messages, in the order received, each by its {@link Processed#verdict()}.
     * Must not acknowledge anything of a batch before the messages received ahead of it in the same
     * call are settled (a cumulative ack would otherwise cover them).
     *
     * @throws Exception when a settlement did not happen: the driver logs it; in group order it stops
     *                   the message's group (nothing behind it is applied until it is settled)
     */
    void settle(List<Processed<M>> processed) throws Exception;

    /** Keeps messages still being worked on from being redelivered (visibility, in-progress); default nothing. */
    default void extend(List<M> messages) {}

    /** Hands back received messages the driver did not process, so they come again soon; default nothing. */
    default void release(List<M> messages) {}

    /**
     * The loop died of an unexpected failure (an {@code Error}, a bug): make the broker redeliver
     * whatever it handed out and was not settled (for example close the channel); default nothing.
     */
    default void abandon(Throwable cause) {}
}
