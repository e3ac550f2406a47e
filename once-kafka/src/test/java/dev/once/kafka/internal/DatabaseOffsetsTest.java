package dev.once.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.TransactionHandle;
import dev.once.tx.TransactionProvider;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Offsets written in the claim transaction, on each database: kept on commit, dropped on rollback. */
class DatabaseOffsetsTest {

    private static final TopicPartition P0 = new TopicPartition("payments", 0);
    private static final TopicPartition P1 = new TopicPartition("payments", 1);

    @ParameterizedTest
    @ValueSource(strings = {"postgresql", "mariadb"})
    void offsetsCommitWithTheTransactionAndOnlyThen(String database) throws Exception {
        try (TestDatabase db = database.equals("postgresql")
                ? TestPostgres.shared().freshDatabase()
                : TestMariaDb.shared().freshDatabase(2)) {
            DatabaseOffsets offsets = new DatabaseOffsets(db.dataSource(), "billing-group");
            OrderGuard guard = new OrderGuard((Handler) (d, tx) -> {}, offsets);
            TransactionProvider transactions = guard.transactions(db.dataSource());
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .transactions(transactions)
                    .consumer("billing")
                    .handler(guard)
                    .build();
            guard.bind(engine.inbox(), "billing");

            try (TransactionHandle h = transactions.begin()) {
                offsets.applied(P0, 5);
                offsets.applied(P0, 3); // an earlier record of the same partition: the highest wins
                offsets.applied(P1, 9);
                h.commit();
            }
            assertThat(offsets.read()).isEqualTo(Map.of(P0, 5L, P1, 9L));

            try (TransactionHandle h = transactions.begin()) {
                offsets.applied(P0, 8);
                h.rollback();
            }
            assertThat(offsets.read())
                    .as("a rolled-back transaction moves no offset")
                    .containsEntry(P0, 5L);

            try (TransactionHandle h = transactions.begin()) {
                offsets.applied(P0, 8);
                h.commit();
            }
            assertThat(offsets.read()).containsEntry(P0, 8L).containsEntry(P1, 9L);
        }
    }
}
