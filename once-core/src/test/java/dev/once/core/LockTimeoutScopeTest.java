package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The builder's lock timeout bounds how long the claim waits for a concurrent duplicate, and
 * nothing else: the handler's own statements (and a joined caller's) keep the session's timeout.
 */
class LockTimeoutScopeTest {

    private TestDatabase db;
    private final List<String> seenByHandler = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() {
        db = Ledger.on(TestPostgres.shared().freshDatabase(4));
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private static String lockTimeout(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT current_setting('lock_timeout')")) {
            rs.next();
            return rs.getString(1);
        }
    }

    @Test
    void lockTimeoutAppliesToTheClaimOnlyNotToTheHandlersStatements() throws Exception {
        String session;
        try (Connection c = db.dataSource().getConnection()) {
            session = lockTimeout(c);
        }
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("scoped")
                .lockTimeout(Duration.ofMillis(200))
                .handler((d, tx) -> {
                    seenByHandler.add(lockTimeout(tx.connection()));
                    Ledger.CREDIT.handle(d, tx);
                })
                .build();
        assertThat(consumer.process(Ledger.payment("evt-1", 1)).status()).isEqualTo(Status.APPLIED);
        assertThat(consumer.processBatch(List.of(Ledger.payment("evt-2", 1), Ledger.payment("evt-3", 1))))
                .extracting(Outcome::status)
                .containsOnly(Status.APPLIED);
        assertThat(seenByHandler)
                .as("the handler runs under the session's lock_timeout, not the claim's 200ms")
                .containsOnly(session)
                .hasSize(3);
    }

    @Test
    void aJoinedCallersLockTimeoutIsLeftAsItWas() throws Exception {
        ManualTransactions manual = new ManualTransactions();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(Dialects.POSTGRESQL)
                .consumer("scoped")
                .lockTimeout(Duration.ofMillis(200))
                .handler(Ledger.CREDIT)
                .build();
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                try (Statement s = c.createStatement()) {
                    s.execute("SET LOCAL lock_timeout = '5s'");
                }
                assertThat(consumer.process(Ledger.payment("evt-1", 1)).status())
                        .isEqualTo(Status.APPLIED);
                assertThat(lockTimeout(c))
                        .as("the caller's own setting survives the claim")
                        .isEqualTo("5s");
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(Ledger.balance(db)).isEqualTo(1);
    }
}
