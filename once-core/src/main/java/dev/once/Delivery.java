package dev.once;

import java.nio.charset.StandardCharsets;
import java.util.AbstractMap;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * One delivery of one event, as a broker handed it over. Immutable.
 *
 * <p>{@code eventId} is the <em>producer-assigned event id</em>: the identity of the business
 * event, stamped once when it happened and carried by every copy. It is the dedupe key. It is
 * never a broker id (Kafka offset, SQS MessageId, AMQP delivery tag) and never a hash of the
 * payload, because two separate $20 payments have equal payloads and must both count.
 *
 * <p>{@code attempt} and {@code redelivered} describe this delivery, not the event: they feed
 * metrics and logs (a redelivery handled safely is not a duplicate effect) and never decide
 * anything.
 *
 * @param eventId   producer-assigned event id; 1 to {@value #MAX_EVENT_ID_LENGTH} characters, not blank, no NUL
 * @param type        event type for routing and metrics; empty when unknown
 * @param payload     the message body, copied on the way in (except by {@link #handingOver}) and out
 * @param headers     broker headers as strings, copied
 * @param attempt     1 for a first delivery; the broker's receive count where it has one
 * @param redelivered the broker's own redelivery flag (AMQP {@code redelivered}, SQS receive count above 1)
 * @param source      where it came from, for logs: {@code kafka:orders/3}, {@code sqs:payments}
 *
 * <p>Construction throws {@link InvalidDeliveryException} if the event id is null, blank, too long
 * or contains NUL, or attempt is below 1.
 */
public record Delivery(
        String eventId,
        String type,
        byte[] payload,
        Map<String, String> headers,
        int attempt,
        boolean redelivered,
        String source) {

    /** Longest accepted event id, in characters; the inbox column is sized to it. */
    public static final int MAX_EVENT_ID_LENGTH = 255;

    public Delivery {
        eventId = validEventId(eventId);
        type = type == null ? "" : type;
        // A record's every constructor runs this one, so handingOver tells it to keep the array through an argument:
        // the headers come wrapped in a HandingOver, which only handingOver makes and which ends here. A class check
        // on the map is all the path that does not hand over pays (a ThreadLocal read was 1-2 ns in 20, DeliveryBench).
        if (headers instanceof HandingOver given) {
            headers = given.headers;
            payload = payload == null ? new byte[0] : payload;
        } else {
            payload = payload == null ? new byte[0] : payload.clone();
        }
        headers = headers == null ? Map.of() : Map.copyOf(headers);
        if (attempt < 1) {
            throw new InvalidDeliveryException(
                    "attempt must be 1 or more, but was " + attempt + " for event id '" + eventId + "'");
        }
        source = source == null ? "" : source;
    }

    /**
     * A delivery that keeps {@code payload} itself instead of a copy: for an adapter that made the array for
     * this delivery (encoded a text body, read a frame into a fresh buffer) and hands it over, where the
     * constructor's copy would be a second one. The delivery then owns the array: the caller, and anyone it gave
     * the array to, must never write to it again, so the delivery stays immutable by that contract. An array the
     * broker's client also hands to application code (a {@code byte[]} record value a listener receives) is not
     * the adapter's to give: use the constructor. {@link #payload()} still returns copies. Validated as the
     * constructor validates.
     */
    public static Delivery handingOver(
            String eventId,
            String type,
            byte[] payload,
            Map<String, String> headers,
            int attempt,
            boolean redelivered,
            String source) {
        return new Delivery(eventId, type, payload, new HandingOver(headers), attempt, redelivered, source);
    }

    /**
     * The headers of a {@link #handingOver} call, marked so that the canonical constructor keeps the payload it is
     * given: unwrapped there, never stored or handed on, so no delivery's {@link #headers()} is one. It does not
     * outlive the constructor call: where the compiler inlines that call it allocates none (DeliveryBench), not always
     * in a larger caller (SpringListenerProbe found one on about half of a Kafka listener's calls, 24 B each).
     */
    private static final class HandingOver extends AbstractMap<String, String> {
        final Map<String, String> headers;

        HandingOver(Map<String, String> headers) {
            this.headers = headers;
        }

        // AbstractMap's one abstract method; the constructor reads the field, never the map
        @Override
        public Set<Map.Entry<String, String>> entrySet() {
            return headers == null ? Set.of() : headers.entrySet();
        }
    }

    /** A first delivery of an event with no type, headers or source. */
    public static Delivery of(String eventId, byte[] payload) {
        return new Delivery(eventId, "", payload, Map.of(), 1, false, "");
    }

    /** A first delivery of an event whose payload is UTF-8 text. */
    public static Delivery of(String eventId, String payload) {
        return of(eventId, payload.getBytes(StandardCharsets.UTF_8));
    }

    /** Starts a builder for a delivery of the given event id. */
    public static Builder builder(String eventId) {
        return new Builder(eventId);
    }

    /** The same event delivered again: attempt incremented, marked redelivered. */
    public Delivery redelivery() {
        return new Delivery(eventId, type, payload, headers, attempt + 1, true, source);
    }

    /** A copy of the payload. */
    @Override
    public byte[] payload() {
        return payload.clone();
    }

    /** The payload decoded as UTF-8. */
    public String payloadText() {
        return new String(payload, StandardCharsets.UTF_8);
    }

    static String validEventId(String eventId) {
        if (eventId == null) {
            throw new InvalidDeliveryException("event id must be present, but was null: the producer must stamp a "
                    + "stable event id (header or payload field) on every message");
        }
        if (eventId.isBlank()) {
            throw new InvalidDeliveryException("event id must not be blank, but was '" + eventId + "'");
        }
        if (eventId.length() > MAX_EVENT_ID_LENGTH) {
            throw new InvalidDeliveryException("event id must be at most " + MAX_EVENT_ID_LENGTH
                    + " characters, but was " + eventId.length() + " characters: '"
                    + eventId.substring(0, 40) + "…'");
        }
        if (eventId.indexOf('\0') >= 0) {
            throw new InvalidDeliveryException(
                    "event id must not contain a NUL character, but was '" + eventId.replace("\0", "\\0") + "'");
        }
        int lone = dev.once.internal.Names.unpairedSurrogate(eventId);
        if (lone >= 0) {
            throw new InvalidDeliveryException("event id must be well-formed UTF-16, but has an unpaired surrogate"
                    + " U+" + Integer.toHexString(eventId.charAt(lone)).toUpperCase(java.util.Locale.ROOT)
                    + " at index " + lone + " (it would be stored as '?' and collide with other ids)");
        }
        return eventId;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Delivery d
                && eventId.equals(d.eventId)
                && type.equals(d.type)
                && Arrays.equals(payload, d.payload)
                && headers.equals(d.headers)
                && attempt == d.attempt
                && redelivered == d.redelivered
                && source.equals(d.source);
    }

    @Override
    public int hashCode() {
        return Objects.hash(eventId, type, Arrays.hashCode(payload), headers, attempt, redelivered, source);
    }

    /** The header names only, never their values: headers carry tokens and signatures, and deliveries get logged. */
    @Override
    public String toString() {
        return "Delivery[eventId=" + eventId + ", type=" + type + ", payload=" + payload.length + " bytes, headers="
                + new java.util.TreeSet<>(headers.keySet()) + ", attempt=" + attempt + ", redelivered=" + redelivered
                + ", source=" + source + "]";
    }

    /** Builds a {@link Delivery}; validation happens in {@link #build()}. Not thread-safe. */
    public static final class Builder {
        private final String eventId;
        private String type = "";
        private byte[] payload = new byte[0];
        private Map<String, String> headers = Map.of();
        private int attempt = 1;
        private boolean redelivered;
        private String source = "";

        private Builder(String eventId) {
            this.eventId = eventId;
        }

        public Builder type(String type) {
            this.type = type;
            return this;
        }

        public Builder payload(byte[] payload) {
            this.payload = payload;
            return this;
        }

        public Builder payload(String payload) {
            this.payload = payload.getBytes(StandardCharsets.UTF_8);
            return this;
        }

        public Builder headers(Map<String, String> headers) {
            this.headers = headers;
            return this;
        }

        public Builder attempt(int attempt) {
            this.attempt = attempt;
            return this;
        }

        public Builder redelivered(boolean redelivered) {
            this.redelivered = redelivered;
            return this;
        }

        public Builder source(String source) {
            this.source = source;
            return this;
        }

        public Delivery build() {
            return new Delivery(eventId, type, payload, headers, attempt, redelivered, source);
        }
    }
}
