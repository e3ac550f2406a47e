package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.springframework.kafka.support.KafkaHeaders;

/**
 * A Kafka record read into a {@link Delivery} (no I/O): whatever headers a producer sends, repeated keys
 * and null values included, the delivery holds each key's last value (what {@code Headers.lastHeader}
 * reads), its event id is the event-id header's last value and its attempt spring-kafka's last
 * delivery-attempt header; a record with no event id is refused with the header's name.
 */
class KafkaRecordDeliveryPropertyTest {

    private static final String ID = "once-event-id";

    record Sent(String key, byte[] value) {}

    @Provide
    Arbitrary<List<Sent>> headers() {
        Arbitrary<String> keys = Arbitraries.of(ID, KafkaHeaders.DELIVERY_ATTEMPT, "a", "b", "traceparent", "c");
        Arbitrary<byte[]> text = Arbitraries.strings()
                .alpha()
                .ofMinLength(1)
                .ofMaxLength(6)
                .map(v -> v.getBytes(StandardCharsets.UTF_8));
        Arbitrary<byte[]> values = Arbitraries.oneOf(
                text,
                Arbitraries.integers()
                        .between(-1, 5)
                        .map(n -> ByteBuffer.allocate(4).putInt(n).array()),
                Arbitraries.just(null));
        // an event id is text or absent (a malformed one is EventIdCheck's matter, not the header pass's)
        Arbitrary<Sent> header = keys.flatMap(k ->
                (k.equals(ID) ? Arbitraries.oneOf(text, Arbitraries.just(null)) : values).map(v -> new Sent(k, v)));
        // up to 40: past the size at which repeated keys are found by a hash map instead of by comparison
        return header.list().ofMaxSize(40);
    }

    @Property(tries = 500)
    void eachKeyKeepsItsLastValue(@ForAll("headers") List<Sent> sent) {
        ConsumerRecord<String, String> record = new ConsumerRecord<>("orders", 2, 41L, "k", "paid");
        Map<String, byte[]> last = new HashMap<>();
        for (Sent h : sent) {
            record.headers().add(new RecordHeader(h.key(), h.value()));
            last.put(h.key(), h.value());
        }
        byte[] id = last.get(ID);
        if (id == null) {
            assertThatThrownBy(() -> ListenerMessages.delivery(record, ID, null))
                    .isInstanceOf(InvalidDeliveryException.class)
                    .hasMessageContaining("header '" + ID + "' is missing");
            return;
        }
        Delivery d = ListenerMessages.delivery(record, ID, null);
        Map<String, String> expected = new HashMap<>();
        last.forEach((k, v) -> expected.put(k, v == null ? "" : new String(v, StandardCharsets.UTF_8)));
        assertThat(d.headers()).isEqualTo(expected);
        assertThat(d.eventId()).isEqualTo(new String(id, StandardCharsets.UTF_8));
        byte[] attempt = last.get(KafkaHeaders.DELIVERY_ATTEMPT);
        int expectedAttempt = attempt != null && attempt.length == 4
                ? Math.max(1, ByteBuffer.wrap(attempt).getInt())
                : 1;
        assertThat(d.attempt()).isEqualTo(expectedAttempt);
        assertThat(d.redelivered()).isEqualTo(expectedAttempt > 1);
        assertThat(d.source()).isEqualTo("kafka:orders/2@41");
        assertThat(d.payloadText()).isEqualTo("paid");
    }
}
