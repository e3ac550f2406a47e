package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.List;
import org.junit.jupiter.api.Test;

class IdentityTest {

    @Test
    void twoDifferentEventsWithIdenticalPayloadsBothApply() throws Exception {
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(2))) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler(Ledger.CREDIT)
                    .build();
            assertThat(consumer.process(Delivery.of("payment-1", "2000")).status())
                    .isEqualTo(Status.APPLIED);
            assertThat(consumer.process(Delivery.of("payment-2", "2000")).status())
                    .isEqualTo(Status.APPLIED);
            assertThat(consumer.processBatch(
                            List.of(Delivery.of("payment-3", "2000"), Delivery.of("payment-4", "2000"))))
                    .allSatisfy(o -> assertThat(o.status()).isEqualTo(Status.APPLIED));
            assertThat(Ledger.balance(db))
                    .as("four separate $20 payments count four times")
                    .isEqualTo(8000);
        }
    }

    @Test
    void claimsAreScopedByConsumerSoEachConsumerAppliesTheEventOnce() throws Exception {
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(2))) {
            IdempotentConsumer billing = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler(Ledger.CREDIT)
                    .build();
            IdempotentConsumer audit = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("audit")
                    .handler(Ledger.CREDIT)
                    .build();
            Delivery event = Delivery.of("payment-1", "5");
            assertThat(billing.process(event).status()).isEqualTo(Status.APPLIED);
            assertThat(audit.process(event).status()).isEqualTo(Status.APPLIED);
            assertThat(billing.process(event).status()).isEqualTo(Status.DUPLICATE);
            assertThat(audit.process(event).status()).isEqualTo(Status.DUPLICATE);
        }
    }
}
