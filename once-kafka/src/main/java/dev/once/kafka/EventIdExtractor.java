package dev.once.kafka;

import dev.once.kafka.internal.HeaderEventId;
import dev.once.outbox.OutboxMessage;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Finds the producer-assigned event id of a record: the dedupe key. Never the offset, never a hash
 * of the value: a replayed record keeps its id, and two equal payments keep theirs apart.
 *
 * <p>Return {@code null} when the record carries no id; the runner then applies its
 * {@link MissingEventIdPolicy}. An exception thrown here is treated the same way, with the
 * exception as the reason. Implementations must be thread-safe and side-effect free (a record may
 * be asked again after a retry or a rebalance).
 */
@FunctionalInterface
public interface EventIdExtractor {

    /** The header the runner reads by default, {@value}: the one the outbox publishers stamp. */
    String DEFAULT_HEADER = OutboxMessage.EVENT_ID_HEADER;

    /** The event id of {@code record}, or null when it has none. */
    String eventId(ConsumerRecord<byte[], byte[]> record);

    /** Reads the last header named {@code name}, as UTF-8; null when absent or empty. */
    static EventIdExtractor header(String name) {
        Objects.requireNonNull(name, "name");
        if (name.isBlank()) {
            throw new dev.once.InvalidConfigurationException(
                    "event id header name must not be blank, but was '" + name + "'");
        }
        return new HeaderEventId(name);
    }
}
