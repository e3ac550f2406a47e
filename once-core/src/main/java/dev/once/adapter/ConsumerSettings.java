package dev.once.adapter;

import dev.once.InvalidConfigurationException;
import dev.once.RetryPolicy;
import java.time.Duration;
import java.util.Objects;

/**
 * The settings every broker consumer's builder takes alike, and their checks, written once: where
 * the producer's event id stands (a header or an attribute, by the adapter's own name), the pause
 * after failed receives ({@link AdapterDriver.Builder#receiveRetries}) and whether a working batch
 * sends a heartbeat. Each {@code with…} checks its argument at once and returns a new value, so a
 * builder keeps one field and a bad value is refused where it is given, naming the setting and the
 * value. Immutable, thread-safe.
 *
 * <p>The static checks are the ranges the adapters' other settings share.
 */
public final class ConsumerSettings {

    private final String eventIdSetting;
    private final String eventId;
    private final RetryPolicy receiveRetries;
    private final boolean heartbeat;

    private ConsumerSettings(String eventIdSetting, String eventId, RetryPolicy receiveRetries, boolean heartbeat) {
        this.eventIdSetting = eventIdSetting;
        this.eventId = eventId;
        this.receiveRetries = receiveRetries;
        this.heartbeat = heartbeat;
    }

    /**
     * The defaults: event id under {@code defaultEventId}, {@link AdapterDriver#DEFAULT_RECEIVE_RETRIES},
     * heartbeat on.
     *
     * @param eventIdSetting the builder method's name ({@code eventIdHeader}, {@code eventIdAttribute}),
     *     which the messages name
     */
    public static ConsumerSettings defaults(String eventIdSetting, String defaultEventId) {
        Objects.requireNonNull(eventIdSetting, "eventIdSetting");
        return new ConsumerSettings(eventIdSetting, null, AdapterDriver.DEFAULT_RECEIVE_RETRIES, true)
                .withEventId(defaultEventId);
    }

    /** @throws InvalidConfigurationException if blank, {@link NullPointerException} if null */
    public ConsumerSettings withEventId(String eventId) {
        Objects.requireNonNull(eventId, eventIdSetting);
        if (eventId.isBlank()) {
            throw new InvalidConfigurationException(eventIdSetting + " must not be blank");
        }
        return new ConsumerSettings(eventIdSetting, eventId, receiveRetries, heartbeat);
    }

    public ConsumerSettings withReceiveRetries(RetryPolicy policy) {
        return new ConsumerSettings(eventIdSetting, eventId, Objects.requireNonNull(policy, "policy"), heartbeat);
    }

    public ConsumerSettings withHeartbeat(boolean heartbeat) {
        return new ConsumerSettings(eventIdSetting, eventId, receiveRetries, heartbeat);
    }

    /** The header or attribute with the producer's event id. */
    public String eventId() {
        return eventId;
    }

    public RetryPolicy receiveRetries() {
        return receiveRetries;
    }

    public boolean heartbeat() {
        return heartbeat;
    }

    /**
     * @return {@code value}
     * @throws InvalidConfigurationException naming {@code what} and the value, if outside {@code min..max}
     */
    public static int between(String what, int value, int min, int max) {
        if (value < min || value > max) {
            throw new InvalidConfigurationException(
                    what + " must be between " + min + " and " + max + ", but was " + value);
        }
        return value;
    }

    /**
     * @return {@code value}
     * @throws InvalidConfigurationException naming {@code what} and the value, if zero or negative
     */
    public static Duration positive(String what, Duration value) {
        Objects.requireNonNull(value, what);
        if (value.isNegative() || value.isZero()) {
            throw new InvalidConfigurationException(what + " must be positive, but was " + value);
        }
        return value;
    }
}
