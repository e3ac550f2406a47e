package dev.once.examples.payments;

import dev.once.spring.IdempotentListener;
import dev.once.spring.OnceOutbox;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.stereotype.Component;

/**
 * Consumes {@code account,amount} payments. The three writes (JPA entity, ledger update, outbox charge)
 * commit with the claim of the event id, or not at all; a duplicate skips this method.
 */
@Component
public class PaymentListener {

    private final PaymentRepository payments;
    private final JdbcTemplate jdbc;
    private final OnceOutbox outbox;
    private final String provider;

    public PaymentListener(
            PaymentRepository payments,
            JdbcTemplate jdbc,
            OnceOutbox outbox,
            @Value("${payments.provider-url}") String provider) {
        this.payments = payments;
        this.jdbc = jdbc;
        this.outbox = outbox;
        this.provider = provider;
    }

    @KafkaListener(topics = "${payments.topic}")
    @IdempotentListener(consumer = "payments")
    public void on(ConsumerRecord<String, String> record) throws SQLException {
        String[] fields = record.value().split(",");
        String account = fields[0];
        long amount = Long.parseLong(fields[1]);
        String eventId = new String(record.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8);
        payments.save(new Payment(eventId, account, amount));
        jdbc.update("UPDATE ledger SET balance = balance + ? WHERE account = ?", amount, account);
        outbox.add(
                provider,
                account,
                ("{\"account\":\"" + account + "\",\"amount\":" + amount + "}").getBytes(StandardCharsets.UTF_8),
                Map.of(),
                "charge:" + eventId);
    }
}
