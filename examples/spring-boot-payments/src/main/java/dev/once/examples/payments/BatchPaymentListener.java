package dev.once.examples.payments;

import dev.once.spring.IdempotentListener;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.stereotype.Component;

/**
 * The same payments, a poll at a time: the poll's event ids are claimed with one statement, the method
 * gets only the records claimed for the first time (copies inside the poll and already-applied events are
 * gone), and credits the ledger set-wise: amounts summed per account, accounts in sorted order (one lock
 * order, so two polls never deadlock), one JDBC batch. All of it commits with the claims, or none of it.
 */
@Component
public class BatchPaymentListener {

    private final PaymentRepository payments;
    private final JdbcTemplate jdbc;

    /**
     * A batch container with {@code AckMode.BATCH} (the application's {@code ack-mode=record} is refused for a
     * batch listener): the poll's offsets are committed after the method returned, so after the commit.
     */
    @Bean
    static ConcurrentKafkaListenerContainerFactory<Object, Object> batchFactory(
            ConsumerFactory<Object, Object> consumers) {
        var factory = new ConcurrentKafkaListenerContainerFactory<Object, Object>();
        factory.setConsumerFactory(consumers);
        factory.setBatchListener(true);
        factory.getContainerProperties().setAckMode(ContainerProperties.AckMode.BATCH);
        return factory;
    }

    public BatchPaymentListener(PaymentRepository payments, JdbcTemplate jdbc) {
        this.payments = payments;
        this.jdbc = jdbc;
    }

    @KafkaListener(
            topics = "${payments.batch-topic}",
            batch = "true",
            groupId = "${payments.batch-group:payments-batch}")
    @IdempotentListener(consumer = "payments-batch")
    public void on(List<ConsumerRecord<String, String>> fresh) {
        Map<String, Long> perAccount = new TreeMap<>();
        List<Payment> rows = new ArrayList<>(fresh.size());
        for (ConsumerRecord<String, String> record : fresh) {
            String[] fields = record.value().split(",");
            long amount = Long.parseLong(fields[1]);
            perAccount.merge(fields[0], amount, Long::sum);
            String eventId =
                    new String(record.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8);
            rows.add(new Payment(eventId, fields[0], amount));
        }
        payments.saveAll(rows);
        jdbc.batchUpdate(
                "UPDATE ledger SET balance = balance + ? WHERE account = ?",
                perAccount.entrySet().stream()
                        .map(e -> new Object[] {e.getValue(), e.getKey()})
                        .toList());
    }
}
