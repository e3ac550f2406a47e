package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.OutboxHeaders;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.spring.IdempotentListenerPostProcessor;
import dev.once.spring.OnceOutbox;
import dev.once.spring.OnceSpring;
import dev.once.spring.OnceTracing;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/** The starter on a Boot application that has only spring-boot-starter-jdbc, the PostgreSQL driver and it. */
class OnceAutoConfigurationTest {

    static TestDatabase db;
    static String url;

    @BeforeAll
    static void database() {
        db = TestPostgres.shared().freshDatabase(4);
        url = ((HikariDataSource) db.dataSource()).getJdbcUrl();
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    /** Only what spring-boot-starter-jdbc brings: Kafka, once-http, Actuator health hidden. */
    private static ApplicationContextRunner jdbcOnly() {
        return new ApplicationContextRunner()
                .withClassLoader(new FilteredClassLoader(
                        "org.springframework.kafka",
                        "dev.once.kafka",
                        "dev.once.http",
                        "io.micrometer.tracing",
                        Boot.HEALTH_PACKAGES[0],
                        Boot.HEALTH_PACKAGES[1]))
                .withConfiguration(AutoConfigurations.of(
                        Boot.DATA_SOURCE,
                        Boot.DATA_SOURCE_TRANSACTION_MANAGER,
                        OnceKafkaAutoConfiguration.class,
                        OnceAutoConfiguration.class,
                        Boot.ONCE_HEALTH,
                        OnceHttpAutoConfiguration.class))
                .withPropertyValues("spring.datasource.url=" + url);
    }

    @Test
    void bootsWithOnlyTheJdbcStarterThePostgresDriverAndTheStarter() {
        jdbcOnly().run(context -> {
            assertThat(context)
                    .hasNotFailed()
                    .hasSingleBean(OnceSpring.class)
                    .hasSingleBean(OnceOutbox.class)
                    .hasSingleBean(IdempotentListenerPostProcessor.class)
                    .hasSingleBean(OutboxAdmin.class)
                    .hasSingleBean(OnceRelayLifecycle.class)
                    .hasSingleBean(OnceRetentionLifecycle.class)
                    .hasSingleBean(OnceSchema.class) // the check, on tables that are current
                    .doesNotHaveBean("onceIdempotencyFilter");
            OnceSpring once = context.getBean(OnceSpring.class);
            assertThat(once.dataSource()).isSameAs(context.getBean(DataSource.class));
            assertThat(once.transactionManager()).isSameAs(context.getBean(PlatformTransactionManager.class));
            assertThat(context.getBean(OnceRelayLifecycle.class).isRunning())
                    .as("relay started with the context")
                    .isTrue();
            // the outbox joins the application's transactions
            new TransactionTemplate(once.transactionManager()).executeWithoutResult(s -> {
                try {
                    context.getBean(OnceOutbox.class)
                            .add("https://psp.example/charges", null, new byte[0], Map.of(), "boot-1");
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertThat(new JdbcTemplate(once.dataSource())
                            .queryForObject(
                                    "SELECT count(*) FROM once_outbox WHERE idempotency_key = 'boot-1'", Long.class))
                    .isEqualTo(1);
        });
    }

    @Test
    void withATracerAndAPropagatorRowsStoreTheTraceAndTheRelayLinksToIt() {
        ApplicationContextRunner tracing = new ApplicationContextRunner()
                .withClassLoader(
                        new FilteredClassLoader("org.springframework.kafka", "dev.once.kafka", "dev.once.http"))
                .withConfiguration(AutoConfigurations.of(
                        Boot.DATA_SOURCE, Boot.DATA_SOURCE_TRANSACTION_MANAGER, OnceAutoConfiguration.class))
                .withPropertyValues("spring.datasource.url=" + url, "once.relay.enabled=false");
        tracing.withBean(Tracer.class, () -> Tracer.NOOP)
                .withBean(Propagator.class, () -> Propagator.NOOP)
                .run(context -> {
                    assertThat(context).hasNotFailed().hasSingleBean(OnceTracing.class);
                    assertThat(context.getBean(OnceSpring.class).outboxHeaders())
                            .isSameAs(context.getBean(OutboxHeaders.class));
                    assertThat(context).hasSingleBean(OnceTracingConfiguration.SendSpans.class);
                });
        tracing.withBean(Tracer.class, () -> Tracer.NOOP)
                .withBean(Propagator.class, () -> Propagator.NOOP)
                .withPropertyValues("once.tracing.enabled=false")
                .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(OnceTracing.class));
        tracing.run(context -> {
            assertThat(context).hasNotFailed().doesNotHaveBean(OnceTracing.class);
            assertThat(context.getBean(OnceSpring.class).outboxHeaders()).isSameAs(OutboxHeaders.NONE);
        });
    }

    @Test
    void relayStopsWithTheContext() {
        OnceRelayLifecycle[] relay = new OnceRelayLifecycle[1];
        jdbcOnly().run(context -> relay[0] = context.getBean(OnceRelayLifecycle.class));
        assertThat(relay[0].isRunning()).isFalse();
    }

    @Test
    void backsOffWhenTheApplicationDefinesItsOwnBeans() {
        AtomicInteger sent = new AtomicInteger();
        Publisher mine = m -> {
            sent.incrementAndGet();
            return Receipt.NONE;
        };
        jdbcOnly()
                .withBean("oncePublisher", Publisher.class, () -> mine)
                .withUserConfiguration(UserOnce.class)
                .run(context -> {
                    assertThat(context).hasNotFailed().hasSingleBean(OnceSpring.class);
                    assertThat(context.getBean(OnceSpring.class)).isSameAs(UserOnce.built);
                    assertThat(context.getBean(Publisher.class)).isSameAs(mine);
                });
    }

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    static class UserOnce {
        static OnceSpring built;

        @org.springframework.context.annotation.Bean
        OnceSpring myOnce(DataSource ds, PlatformTransactionManager tm) {
            built = OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .tablePrefix("once_")
                    .build();
            return built;
        }
    }

    @Test
    void onceEnabledFalseTurnsEverythingOff() {
        jdbcOnly()
                .withPropertyValues("once.enabled=false")
                .run(context -> assertThat(context)
                        .hasNotFailed()
                        .doesNotHaveBean(OnceSpring.class)
                        .doesNotHaveBean(OnceRelayLifecycle.class)
                        .doesNotHaveBean(IdempotentListenerPostProcessor.class));
    }

    @Test
    void schemaMigrateCreatesTheTablesWhenAskedTo() throws Exception {
        String schema = "once_boot_" + ProcessHandle.current().pid() + "_" + System.nanoTime();
        String base = TestPostgres.shared().jdbcUrl();
        try (Connection c = DriverManager.getConnection(base);
                Statement s = c.createStatement()) {
            s.execute("CREATE SCHEMA " + schema);
        }
        try {
            String bare = base + (base.contains("?") ? "&" : "?") + "currentSchema=" + schema;
            jdbcOnly()
                    .withPropertyValues("spring.datasource.url=" + bare, "once.schema.migrate=true")
                    .run(context -> {
                        assertThat(context).hasNotFailed().hasSingleBean(OnceSchema.class);
                        assertThat(context.getBean(OnceSchema.class).applied()).isPositive();
                        assertThat(new JdbcTemplate(context.getBean(DataSource.class))
                                        .queryForObject("SELECT count(*) FROM once_inbox", Long.class))
                                .isZero();
                    });
        } finally {
            try (Connection c = DriverManager.getConnection(base);
                    Statement s = c.createStatement()) {
                s.execute("DROP SCHEMA " + schema + " CASCADE");
            }
        }
    }

    @Test
    void healthIndicatorReportsTheRelayAndTheOutbox() {
        new ApplicationContextRunner()
                .withClassLoader(new FilteredClassLoader("org.springframework.kafka", "dev.once.kafka"))
                .withConfiguration(AutoConfigurations.of(
                        Boot.DATA_SOURCE,
                        Boot.DATA_SOURCE_TRANSACTION_MANAGER,
                        OnceAutoConfiguration.class,
                        Boot.ONCE_HEALTH))
                .withPropertyValues("spring.datasource.url=" + url)
                .run(context -> {
                    var h = Boot.health(context);
                    assertThat(h.status()).isEqualTo("UP");
                    assertThat(h.details())
                            .containsEntry("relay", "running")
                            .containsKeys(
                                    "outboxPending", "outboxLag", "outboxDead", "inboxRetention", "redeliveryHorizon");
                    context.getBean(OnceRelayLifecycle.class).stop();
                    assertThat(Boot.health(context).status()).isEqualTo("DOWN");
                });
    }

    @Test
    void propertyDefaultsAreTheCoreDefaults() {
        OnceProperties p = new OnceProperties();
        assertThat(p.getTablePrefix()).isEqualTo(dev.once.jdbc.TablePrefix.DEFAULT);
        assertThat(p.getRelay().getBatchSize()).isEqualTo(dev.once.outbox.OutboxRelay.DEFAULT_BATCH_SIZE);
        assertThat(p.getRelay().getPollInterval()).isEqualTo(dev.once.outbox.OutboxRelay.DEFAULT_POLL_INTERVAL);
        dev.once.RetryPolicy relayRetries = dev.once.outbox.OutboxRelay.DEFAULT_RETRY_POLICY;
        assertThat(p.getRelay().getMaxAttempts()).isEqualTo(relayRetries.maxRetries() + 1);
        assertThat(p.getRelay().getInitialBackoff()).isEqualTo(relayRetries.initialDelay());
        assertThat(p.getRelay().getMaxBackoff()).isEqualTo(relayRetries.maxDelay());
        assertThat(p.getRelay().getLeaseTtl()).isEqualTo(dev.once.outbox.OutboxRelay.DEFAULT_LEASE_TTL);
        assertThat(p.getRetention().getRedeliveryHorizon())
                .isEqualTo(dev.once.retention.InboxPruner.DEFAULT_REDELIVERY_HORIZON);
        assertThat(p.getRetention().getInbox()).isEqualTo(dev.once.retention.InboxPruner.DEFAULT_REDELIVERY_HORIZON);
        assertThat(p.getRetention().getOutbox()).isEqualTo(dev.once.retention.OutboxPruner.DEFAULT_RETENTION);
        assertThat(p.getRetention().getStreamPositions())
                .isEqualTo(dev.once.retention.StreamPositionPruner.DEFAULT_RETENTION);
    }

    /** The retention schedule prunes the positions of streams that did not move within once.retention.stream-positions. */
    @Test
    void theScheduleAlsoPrunesStreamPositions() {
        db.execute("INSERT INTO once_stream_position (consumer, stream, position, moved_at) VALUES"
                + " ('boot-prune', 'quiet', 1, now() - interval '2 minutes'), ('boot-prune', 'moving', 1, now())");
        jdbcOnly()
                .withPropertyValues(
                        "once.relay.enabled=false",
                        "once.retention.interval=100ms",
                        "once.retention.stream-positions=1m")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    long deadline = System.nanoTime() + 30_000_000_000L;
                    while (db.queryLong("SELECT count(*) FROM once_stream_position WHERE stream = 'quiet'") > 0) {
                        assertThat(System.nanoTime())
                                .as("the quiet stream pruned")
                                .isLessThan(deadline);
                        Thread.sleep(50);
                    }
                    assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE consumer = 'boot-prune'"))
                            .as("the stream that moved within the minute kept")
                            .isEqualTo(1);
                });
        db.execute("DELETE FROM once_stream_position WHERE consumer = 'boot-prune'");
    }

    @Test
    void aStreamPositionRetentionUnderAMinuteFailsTheStart() {
        jdbcOnly()
                .withPropertyValues("once.relay.enabled=false", "once.retention.stream-positions=30s")
                .run(context -> {
                    assertThat(context).hasFailed();
                    StringBuilder messages = new StringBuilder();
                    for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
                        messages.append(t.getMessage()).append('\n');
                    }
                    assertThat(messages.toString())
                            .contains("retention must be at least 1 minute, but was PT30S")
                            .contains("after its successors");
                });
    }

    @Test
    void configurationMetadataIsGenerated() throws Exception {
        try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in).as("spring-boot-configuration-processor output").isNotNull();
            String json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            assertThat(json)
                    .contains(
                            "\"once.enabled\"",
                            "\"once.schema.migrate\"",
                            "\"once.schema.initialize-schema\"",
                            "\"once.relay.batch-size\"",
                            "\"once.retention.inbox\"",
                            "\"once.retention.stream-positions\"",
                            "\"once.http.idempotency.enabled\"");
        }
    }
}
