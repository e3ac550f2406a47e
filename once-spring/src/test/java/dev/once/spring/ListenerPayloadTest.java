package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** What a listener's message gives the engine to fingerprint (no I/O). */
class ListenerPayloadTest {

    /** A deserialized value without its own toString: Object's identity hash differs per copy. */
    private static final class Order {
        final long id;

        Order(long id) {
            this.id = id;
        }
    }

    @Test
    void rawBytesAndTextAreFingerprintedButADeserializedObjectIsNot() {
        assertThat(ListenerMessages.bytes(new byte[] {1, 2})).containsExactly(1, 2);
        assertThat(ListenerMessages.bytes("paid")).isEqualTo("paid".getBytes(StandardCharsets.UTF_8));
        assertThat(ListenerMessages.bytes(new Order(7)))
                .as("two copies of one event, deserialized twice, must not look like two payloads")
                .isEqualTo(ListenerMessages.bytes(new Order(7)))
                .isEmpty();
        assertThat(ListenerMessages.bytes(null)).isEmpty();
    }
}
