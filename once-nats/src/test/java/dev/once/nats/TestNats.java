package dev.once.nats;

import dev.once.outbox.OutboxMessage;
import dev.once.testsupport.Services;
import io.nats.client.Connection;
import io.nats.client.JetStreamManagement;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

/** The NATS server on this machine (127.0.0.1:4222, JetStream on), or a skip saying how to start it. */
final class TestNats {

    static final String URL = System.getenv().getOrDefault("ONCE_TEST_NATS_URL", "nats://127.0.0.1:4222");

    private TestNats() {}

    static Connection connect() {
        try {
            Connection c = Nats.connect(Options.builder()
                    .server(URL)
                    .connectionTimeout(Duration.ofSeconds(5))
                    .maxReconnects(0)
                    .build());
            c.jetStreamManagement().getAccountStatistics(); // fails when JetStream is off
            return c;
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            throw Services.unavailable(
                    "nats", "start nats-server with JetStream on 127.0.0.1:4222 (nats-server -js)", e);
        }
    }

    /** A memory stream named {@code name} over the subject {@code name}; delete it after the test. */
    static void createStream(Connection c, String name) throws Exception {
        c.jetStreamManagement()
                .addStream(StreamConfiguration.builder()
                        .name(name)
                        .subjects(name)
                        .storageType(StorageType.Memory)
                        .build());
    }

    /** A message as the outbox relay would hand it to the publisher: the event id is also its idempotency key. */
    static OutboxMessage message(String destination, String eventId, String key, String body) {
        return new OutboxMessage(
                0, eventId, destination, key, body.getBytes(StandardCharsets.UTF_8), Map.of(), eventId, 0, null);
    }

    static void deleteStream(Connection c, String name) throws Exception {
        JetStreamManagement jsm = c.jetStreamManagement();
        jsm.deleteStream(name);
    }
}
