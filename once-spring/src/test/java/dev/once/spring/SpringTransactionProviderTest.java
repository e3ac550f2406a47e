package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.simple.JdbcClient;
import org.springframework.jdbc.datasource.LazyConnectionDataSourceProxy;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.support.TransactionTemplate;

/** The claim joins a Spring JDBC transaction: JdbcTemplate and JdbcClient writes commit or roll back with it. */
class SpringTransactionProviderTest {

    static TestDatabase db;
    static JdbcTransactionManager tm;
    static JdbcTemplate jdbc;
    static JdbcClient client;
    static OnceSpring once;
    static final List<String> outcomes = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void setUp() {
        db = TestPostgres.shared().freshDatabase(4);
        db.execute(
                "CREATE TABLE ledger (account text PRIMARY KEY, balance bigint NOT NULL)",
                "CREATE TABLE audit (event_id text NOT NULL)");
        tm = new JdbcTransactionManager(db.dataSource());
        jdbc = new JdbcTemplate(db.dataSource());
        client = JdbcClient.create(db.dataSource());
        once = OnceSpring.builder()
                .dataSource(db.dataSource())
                .transactionManager(tm)
                .outcomeListener((d, o) -> outcomes.add(d.eventId() + "=" + o.tag()))
                .build();
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    @BeforeEach
    void reset() {
        jdbc.update("DELETE FROM ledger");
        jdbc.update("DELETE FROM audit");
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM once_outbox");
        jdbc.update("INSERT INTO ledger VALUES ('acc', 0)");
        outcomes.clear();
    }

    private final IdempotentConsumer billing = once.consumer("billing", (d, tx) -> {
        jdbc.update("UPDATE ledger SET balance = balance + 20 WHERE account = 'acc'");
        client.sql("INSERT INTO audit VALUES (?)").param(d.eventId()).update();
        tx.outbox().add("https://psp.example/charges", "acc", d.payload(), Map.of(), "charge:" + d.eventId());
    });

    private long balance() {
        return db.queryLong("SELECT balance FROM ledger WHERE account = 'acc'");
    }

    @Test
    void claimJdbcTemplateJdbcClientAndOutboxCommitAtomically() {
        TransactionTemplate tt = new TransactionTemplate(tm);
        Delivery evt = Delivery.of("evt-1", "pay 20");

        // crash after the handler, before the commit: nothing of it stays
        assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    billing.process(evt);
                    throw new IllegalStateException("crash before commit");
                }))
                .hasMessage("crash before commit");
        assertThat(balance()).as("effect rolled back with the claim").isZero();
        assertThat(db.queryLong("SELECT count(*) FROM audit")).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isZero();
        assertThat(outcomes).containsExactly("evt-1=failed_retryable");

        // the redelivery applies everything once; the duplicate after it applies nothing
        Outcome first = tt.execute(s -> billing.process(evt.redelivery()));
        Outcome second = tt.execute(s -> billing.process(evt.redelivery()));
        assertThat(first.status()).isEqualTo(Outcome.Status.APPLIED);
        assertThat(second.status()).isEqualTo(Outcome.Status.DUPLICATE);
        assertThat(balance()).as("effect applied exactly once").isEqualTo(20);
        assertThat(db.queryLong("SELECT count(*) FROM audit")).isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(1);
        assertThat(outcomes).containsExactly("evt-1=failed_retryable", "evt-1=applied", "evt-1=duplicate");
    }

    @Test
    void outcomeIsReportedAfterTheCallersCommitNeverBefore() {
        TransactionTemplate tt = new TransactionTemplate(tm);
        tt.executeWithoutResult(s -> {
            billing.process(Delivery.of("evt-2", "x"));
            assertThat(outcomes)
                    .as("nothing is final before the caller's commit")
                    .isEmpty();
        });
        assertThat(outcomes).containsExactly("evt-2=applied");
    }

    @Test
    void failingHandlerMarksTheCallersTransactionRollbackOnly() {
        IdempotentConsumer failing = once.consumer("failing", (d, tx) -> {
            jdbc.update("UPDATE ledger SET balance = balance + 20 WHERE account = 'acc'");
            throw new IllegalStateException("handler failed");
        });
        TransactionTemplate tt = new TransactionTemplate(tm);
        assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    Outcome o = failing.process(Delivery.of("evt-3", "x"));
                    assertThat(o.status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
                    jdbc.update("INSERT INTO audit VALUES ('caller ignored the failed outcome')");
                }))
                .isInstanceOf(org.springframework.transaction.UnexpectedRollbackException.class);
        assertThat(balance()).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM audit")).isZero();
    }

    @Test
    void outsideATransactionFailsFast() {
        assertThatThrownBy(() -> billing.process(Delivery.of("evt-4", "x")))
                .isInstanceOf(IllegalTransactionStateException.class)
                .hasMessageContaining(
                        "no transaction is active on thread 'main': call it from a @Transactional method");
        assertThat(balance()).as("nothing written on a side connection").isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
    }

    @Test
    void transactionManagerOnAnotherDataSourceIsRefusedAtBuild() {
        try (TestDatabase other = TestPostgres.shared().freshDatabase(1)) {
            assertThatThrownBy(() -> OnceSpring.builder()
                            .dataSource(db.dataSource())
                            .transactionManager(new JdbcTransactionManager(other.dataSource()))
                            .build())
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("manages HikariDataSource@")
                    .hasMessageContaining("the claim would commit apart from the business writes");
        }
    }

    @Test
    void transactionOnAnotherDataSourceFailsFastAtTheClaim() {
        try (TestDatabase other = TestPostgres.shared().freshDatabase(1)) {
            TransactionTemplate otherTx = new TransactionTemplate(new JdbcTransactionManager(other.dataSource()));
            assertThatThrownBy(() -> otherTx.executeWithoutResult(s -> billing.process(Delivery.of("evt-5", "x"))))
                    .isInstanceOf(IllegalTransactionStateException.class)
                    .hasMessageContaining("holds no connection of HikariDataSource@");
        }
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
    }

    @Test
    void lazyConnectionProxyOnTheTransactionManagerIsNamed() {
        LazyConnectionDataSourceProxy lazy = new LazyConnectionDataSourceProxy(db.dataSource());
        assertThatThrownBy(() -> OnceSpring.builder()
                        .dataSource(db.dataSource())
                        .transactionManager(new JdbcTransactionManager(lazy))
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("it is a LazyConnectionDataSourceProxy around the one once was given");
        // given the proxy itself, the claim joins the proxy's transaction
        OnceSpring viaLazy = OnceSpring.builder()
                .dataSource(lazy)
                .transactionManager(new JdbcTransactionManager(lazy))
                .build();
        IdempotentConsumer c = viaLazy.consumer(
                "lazy",
                (d, tx) ->
                        new JdbcTemplate(lazy).update("UPDATE ledger SET balance = balance + 1 WHERE account = 'acc'"));
        new TransactionTemplate(viaLazy.transactionManager())
                .executeWithoutResult(s -> c.process(Delivery.of("e", "x")));
        assertThat(balance()).isEqualTo(1);
    }

    @Test
    void transactionAwareProxyIsLookedThrough() {
        TransactionAwareDataSourceProxy aware = new TransactionAwareDataSourceProxy(db.dataSource());
        OnceSpring viaAware =
                OnceSpring.builder().dataSource(aware).transactionManager(tm).build();
        IdempotentConsumer c = viaAware.consumer(
                "aware",
                (d, tx) -> new JdbcTemplate(aware)
                        .update("UPDATE ledger SET balance = balance + 1 WHERE account = 'acc'"));
        TransactionTemplate tt = new TransactionTemplate(tm);
        assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    c.process(Delivery.of("e", "x"));
                    throw new IllegalStateException("rollback");
                }))
                .hasMessage("rollback");
        assertThat(balance()).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
        tt.executeWithoutResult(s -> c.process(Delivery.of("e", "x")));
        assertThat(balance()).isEqualTo(1);
    }

    @Test
    void outboxIsUsableFromAnyTransactionalMethod() throws Exception {
        TransactionTemplate tt = new TransactionTemplate(tm);
        assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    add("rolled back");
                    throw new IllegalStateException("rollback");
                }))
                .hasMessage("rollback");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                .as("a rolled-back transaction sends nothing")
                .isZero();
        tt.executeWithoutResult(s -> {
            add("one");
            add("two");
        });
        assertThat(jdbc.queryForList("SELECT event_id FROM once_outbox ORDER BY id", String.class))
                .hasSize(2)
                .allMatch(id -> id.startsWith(OnceOutbox.STANDALONE_SOURCE + ":"))
                .satisfies(
                        ids -> assertThat(ids.get(0)).endsWith("#1"),
                        ids -> assertThat(ids.get(1)).endsWith("#2"));
        assertThatThrownBy(() -> add("outside"))
                .isInstanceOf(IllegalTransactionStateException.class)
                .hasMessageContaining("no transaction is active");
    }

    private static void add(String body) {
        try {
            once.outbox()
                    .add("https://psp.example/refunds", null, body.getBytes(StandardCharsets.UTF_8), Map.of(), null);
        } catch (java.sql.SQLException e) {
            throw new IllegalStateException(e);
        }
    }
}
