package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outbox;
import dev.once.Outcome;
import dev.once.outbox.OutboxMessage;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What a handler writes to the outbox: in the claim transaction, each message an event of its own. */
class OutboxWriteTest {

    @Test
    void twoMessagesEnqueuedForOneEventGetDistinctStableIdsAndCarryTheirCause() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> {
                        tx.outbox()
                                .add(
                                        "emails",
                                        "c-1",
                                        "receipt".getBytes(StandardCharsets.UTF_8),
                                        Map.of("k", "v"),
                                        null);
                        tx.outbox().add("emails", "c-1", "survey".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                    })
                    .build();
            consumer.process(Delivery.of("order-7-paid", ""));
            consumer.process(Delivery.of("order-7-paid", "").redelivery());
            List<String> rows = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs =
                            s.executeQuery("SELECT event_id, idempotency_key, headers FROM once_outbox ORDER BY id")) {
                while (rs.next()) {
                    rows.add(rs.getString(1) + "|" + rs.getString(2) + "|" + rs.getString(3));
                }
            }
            assertThat(rows)
                    .as("written once, despite the redelivery; two events downstream, not one")
                    .containsExactly(
                            "orders:order-7-paid#1|orders:order-7-paid#1|k=v&" + OutboxMessage.CAUSE_ID_HEADER
                                    + "=order-7-paid&" + OutboxMessage.EVENT_ID_HEADER + "=orders%3Aorder-7-paid%231",
                            "orders:order-7-paid#2|orders:order-7-paid#2|" + OutboxMessage.CAUSE_ID_HEADER
                                    + "=order-7-paid&" + OutboxMessage.EVENT_ID_HEADER + "=orders%3Aorder-7-paid%232");
        }
    }

    @Test
    void aRolledBackHandlerLeavesNoOutboxRowAndABadDestinationIsNamed() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> {
                        tx.outbox().add("emails", null, new byte[0], Map.of(), null);
                        tx.outbox().add(" ", null, new byte[0], Map.of(), null);
                    })
                    .build();
            Outcome o = consumer.process(Delivery.of("order-8-paid", ""));
            assertThat(o.failure()).isInstanceOf(InvalidDeliveryException.class).hasMessageContaining("' '");
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                    .as("the first add rolled back too")
                    .isZero();
        }
    }

    /**
     * Issue 12: a transaction's rows are buffered and written in one statement when the handler
     * returns: addAll keeps their order, and a row the database refuses at that write takes the
     * whole transaction with it (claim and the other rows), so the delivery is retried whole.
     */
    @Test
    void aTransactionsOutboxRowsAreWrittenTogetherAllOrNothing() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            db.execute("ALTER TABLE once_outbox ADD CONSTRAINT no_poison CHECK (destination <> 'poison')");
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> {
                        List<String> ids = tx.outbox()
                                .addAll(List.of(
                                        new Outbox.Message(
                                                "emails", "c-1", "a".getBytes(StandardCharsets.UTF_8), Map.of(), null),
                                        new Outbox.Message(
                                                "emails", "c-1", "b".getBytes(StandardCharsets.UTF_8), Map.of(), null),
                                        new Outbox.Message(
                                                d.payloadText(),
                                                "c-1",
                                                "c".getBytes(StandardCharsets.UTF_8),
                                                Map.of(),
                                                null)));
                        assertThat(ids)
                                .containsExactly(
                                        "orders:" + d.eventId() + "#1",
                                        "orders:" + d.eventId() + "#2",
                                        "orders:" + d.eventId() + "#3");
                    })
                    .build();
            Outcome refused = consumer.process(Delivery.of("e-1", "poison"));
            assertThat(refused.status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                    .as("no row of the refused write")
                    .isZero();
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox"))
                    .as("nor its claim")
                    .isZero();

            assertThat(consumer.process(Delivery.of("e-2", "emails")).status()).isEqualTo(Outcome.Status.APPLIED);
            List<String> rows = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs =
                            s.executeQuery("SELECT convert_from(payload, 'UTF8') FROM once_outbox ORDER BY id")) {
                while (rs.next()) {
                    rows.add(rs.getString(1));
                }
            }
            assertThat(rows).as("all three, ids in the order added").containsExactly("a", "b", "c");
        }
    }

    @Test
    void aLongCauseIdIsHashedSoTheEventIdStaysWithinLimits() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> tx.outbox().add("emails", null, new byte[0], Map.of(), "k"))
                    .build();
            consumer.process(Delivery.of("x".repeat(255), ""));
            assertThat(db.queryLong("SELECT length(event_id) FROM once_outbox"))
                    .as("orders:sha256:<64 hex>#1")
                    .isEqualTo("orders:sha256:".length() + 64 + 2);
        }
    }

    @Test
    void theOutboxHeadersHookAddsToEveryRowAHandlerAddsAndTheHandlersOwnHeadersWin() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            // A hook that tries to pose as the row's event id too: the outbox's own ids must win.
            Map<String, String> hook =
                    Map.of("traceparent", "00-hook-01", "x", "hook", OutboxMessage.EVENT_ID_HEADER, "forged");
            IdempotentConsumer perEvent = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .outboxHeaders(() -> hook)
                    .handler((d, tx) -> tx.outbox().add("emails", "c-1", new byte[0], Map.of("x", "handler"), null))
                    .build();
            IdempotentConsumer setWise = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .outboxHeaders(() -> hook)
                    .batchHandler((deliveries, tx) -> {
                        for (Delivery d : deliveries) {
                            tx.outbox(d).add("invoices", "c-1", new byte[0], Map.of(), null);
                        }
                    })
                    .build();
            perEvent.process(Delivery.of("order-1", ""));
            setWise.processBatch(List.of(Delivery.of("order-2", ""), Delivery.of("order-3", "")));
            List<String> rows = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT event_id, headers FROM once_outbox ORDER BY id")) {
                while (rs.next()) {
                    rows.add(rs.getString(1) + "|" + rs.getString(2));
                }
            }
            assertThat(rows)
                    .hasSize(3)
                    .allSatisfy(row ->
                            assertThat(row).contains("traceparent=00-hook-01").doesNotContain("forged"));
            assertThat(rows.get(0))
                    .as("the handler's header wins over the hook's")
                    .contains("x=handler");
            assertThat(rows.get(1)).contains("x=hook");
        }
    }
}
