package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.spring.OnceOutbox;
import dev.once.spring.OnceSpring;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The {@code once} Actuator endpoint on real PostgreSQL: inbox rows and the oldest claim, the outbox
 * backlog and its dead rows, and the replay and discard actions an operator takes on them.
 */
class OnceEndpointTest {

    @Test
    @SuppressWarnings("unchecked")
    void showsInboxOutboxAndDeadRowsAndReplaysAndDiscardsThem() {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(4)) {
            new ApplicationContextRunner()
                    .withClassLoader(new FilteredClassLoader(
                            "org.springframework.kafka", "dev.once.kafka", "dev.once.http", "io.micrometer.tracing"))
                    .withConfiguration(AutoConfigurations.of(
                            Boot.DATA_SOURCE,
                            Boot.DATA_SOURCE_TRANSACTION_MANAGER,
                            OnceAutoConfiguration.class,
                            OnceEndpointAutoConfiguration.class))
                    .withPropertyValues(
                            "spring.datasource.url=" + ((HikariDataSource) db.dataSource()).getJdbcUrl(),
                            "once.relay.enabled=false",
                            "once.retention.enabled=false",
                            "management.endpoints.web.exposure.include=once")
                    .run(context -> {
                        assertThat(context).hasNotFailed().hasSingleBean(OnceEndpoint.class);
                        OnceSpring once = context.getBean(OnceSpring.class);
                        TransactionTemplate tx = new TransactionTemplate(once.transactionManager());
                        tx.executeWithoutResult(s -> {
                            once.consumer("billing", (d, t) -> {})
                                    .process(Delivery.builder("pay-1").build());
                            for (String key : List.of("a", "b", "c")) {
                                try {
                                    context.getBean(OnceOutbox.class)
                                            .add(
                                                    "https://psp.example/charges",
                                                    key,
                                                    new byte[0],
                                                    Map.of(),
                                                    "charge:" + key);
                                } catch (java.sql.SQLException e) {
                                    throw new IllegalStateException(e);
                                }
                            }
                        });
                        JdbcTemplate jdbc = new JdbcTemplate(once.dataSource());
                        jdbc.update("UPDATE once_outbox SET status = 'dead', last_error = 'HTTP 500 from the provider'"
                                + " WHERE msg_key IN ('b', 'c')");
                        OnceEndpoint endpoint = context.getBean(OnceEndpoint.class);

                        Map<String, Object> read = endpoint.once();
                        assertThat(read.get("schema").toString()).startsWith("current");
                        Map<String, Object> inbox = (Map<String, Object>) read.get("inbox");
                        assertThat(inbox).containsEntry("rows", 1L).containsKeys("oldestProcessedAt", "oldestAge");
                        assertThat(inbox.get("oldestAge")).isNotNull();
                        Map<String, Object> outbox = (Map<String, Object>) read.get("outbox");
                        assertThat(outbox)
                                .containsEntry("pending", 1L)
                                .containsEntry("dead", 2L)
                                .containsEntry("relay", "not in this application");
                        List<Map<String, Object>> dead = (List<Map<String, Object>>) read.get("deadRows");
                        assertThat(dead).extracting(r -> r.get("key")).containsExactly("b", "c");
                        assertThat(dead.get(0)).containsEntry("lastError", "HTTP 500 from the provider");

                        long b = (Long) dead.get(0).get("id");
                        long c = (Long) dead.get(1).get("id");
                        assertThat(endpoint.deadRows("replay", String.valueOf(b)))
                                .containsEntry("done", 1);
                        assertThat(endpoint.deadRows("discard", c + ", " + b))
                                .as("b is pending again, so only c is discarded")
                                .containsEntry("done", 1);
                        Map<String, Object> after =
                                (Map<String, Object>) endpoint.once().get("outbox");
                        assertThat(after).containsEntry("pending", 2L).containsEntry("dead", 0L);

                        assertThatThrownBy(() -> endpoint.deadRows("resend", "1"))
                                .hasMessageContaining("action must be replay or discard, but was 'resend'");
                        assertThatThrownBy(() -> endpoint.deadRows("replay", "1;2"))
                                .hasMessageContaining("'1;2'");
                    });
        }
    }
}
