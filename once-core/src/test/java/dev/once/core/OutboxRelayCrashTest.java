package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A relay is killed (SIGKILL) after the provider accepted a message and before the relay marked it
 * sent. The row stays pending, the next relay sends it again with the same event id and
 * idempotency key, and the receiving inbox applies it once.
 */
class OutboxRelayCrashTest {

    private TestDatabase db;
    private HttpServer receiver;
    private final List<String> received = new CopyOnWriteArrayList<>();
    private final List<Outcome.Status> outcomes = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() throws Exception {
        db = TestPostgres.shared().freshDatabase();
        try (Connection c = db.dataSource().getConnection()) {
            Ledger.create(c);
        }
        // The receiving service: an idempotent consumer behind HTTP, deduplicating on the event id header.
        IdempotentConsumer payments = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("payments")
                .handler(Ledger.CREDIT)
                .meterRegistry(new SimpleMeterRegistry())
                .build();
        receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        receiver.createContext("/payments", exchange -> {
            String eventId = exchange.getRequestHeaders().getFirst(OutboxMessage.EVENT_ID_HEADER);
            String key = exchange.getRequestHeaders().getFirst(HttpPublisher.IDEMPOTENCY_KEY_HEADER);
            byte[] body = exchange.getRequestBody().readAllBytes();
            received.add(eventId + "|" + key);
            Outcome o = payments.process(Delivery.of(eventId, body));
            outcomes.add(o.status());
            byte[] answer = o.status().name().getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(o.shouldAcknowledge() ? 200 : 503, answer.length);
            exchange.getResponseBody().write(answer);
            exchange.close();
        });
        receiver.start();
    }

    @AfterEach
    void tearDown() {
        receiver.stop(0);
        db.close();
    }

    @Test
    void aRelayKilledBetweenPublishAndMarkSendsAgainWithTheSameEventIdAndTheInboxAppliesItOnce() throws Exception {
        String url = "http://127.0.0.1:" + receiver.getAddress().getPort() + "/payments";
        IdempotentConsumer orders = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("orders")
                .meterRegistry(new SimpleMeterRegistry())
                .handler((d, tx) -> tx.outbox().add(url, "order-1", d.payload(), Map.of(), "charge:order-1"))
                .build();
        assertThat(orders.process(Delivery.of("order-1-paid", "2000")).status()).isEqualTo(Outcome.Status.APPLIED);

        String base = TestPostgres.shared().jdbcUrl();
        String jdbcUrl = base + (base.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
        try (ChildJvm child = ChildJvm.start(RelayCrashChild.class, Map.of(), jdbcUrl)) {
            assertThat(child.awaitLineStartingWith("PUBLISHED", Duration.ofSeconds(60)))
                    .isEqualTo("PUBLISHED orders:order-1-paid#1 200");
            child.kill();
        }
        assertThat(received)
                .as("the provider got the first send")
                .containsExactly("orders:order-1-paid#1|charge:order-1");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending'"))
                .as("the kill came before the mark: the row is still pending")
                .isEqualTo(1);

        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(HttpPublisher.builder().build())
                .build();
        // The killed relay's row lock lasts until PostgreSQL notices the dropped connection.
        await().atMost(Duration.ofSeconds(30)).until(() -> relay.relayOnce() == 1);

        assertThat(received)
                .as("sent again, same event id and idempotency key")
                .containsExactly("orders:order-1-paid#1|charge:order-1", "orders:order-1-paid#1|charge:order-1");
        assertThat(outcomes).containsExactly(Outcome.Status.APPLIED, Outcome.Status.DUPLICATE);
        try (Connection c = db.dataSource().getConnection()) {
            assertThat(Ledger.balance(c))
                    .as("the payment was applied exactly once")
                    .isEqualTo(2000);
        }
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'payments'"))
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent' AND response_status = 200"))
                .isEqualTo(1);
    }
}
