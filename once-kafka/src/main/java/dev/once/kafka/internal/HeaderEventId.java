package dev.once.kafka.internal;

import dev.once.kafka.EventIdExtractor;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * {@link EventIdExtractor#header}: the last header named {@code name}, as UTF-8; null when absent
 * or empty. A type of its own so that the runner, which turns every header into text for the
 * delivery anyway, takes the id from those texts instead of decoding it a second time. Not API.
 */
public record HeaderEventId(String name) implements EventIdExtractor {

    @Override
    public String eventId(ConsumerRecord<byte[], byte[]> record) {
        Header h = record.headers().lastHeader(name);
        if (h == null || h.value() == null || h.value().length == 0) {
            return null;
        }
        return new String(h.value(), StandardCharsets.UTF_8);
    }
}
