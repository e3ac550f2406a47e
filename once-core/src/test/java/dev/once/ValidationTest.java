package dev.once;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.retention.InboxPruner;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Bad input gets a specific exception whose message names the value and what is expected. No I/O. */
class ValidationTest {

    @Test
    void aNullEventIdIsRejectedWithAnExplanation() {
        assertThatThrownBy(() -> Delivery.of(null, "x"))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("null")
                .hasMessageContaining("event id");
    }

    @ParameterizedTest
    @ValueSource(strings = {"", " ", "\t\n"})
    void aBlankEventIdIsRejected(String id) {
        assertThatThrownBy(() -> Delivery.of(id, "x"))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("blank");
    }

    @Test
    void anOversizedEventIdIsRejectedWithItsLength() {
        String id = "x".repeat(256);
        assertThatThrownBy(() -> Delivery.of(id, "x"))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("255")
                .hasMessageContaining("256");
        assertThat(Delivery.of("x".repeat(255), "x").eventId()).hasSize(255);
    }

    @Test
    void anEventIdWithNulIsRejected() {
        assertThatThrownBy(() -> Delivery.of("a\0b", "x"))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("a\\0b");
    }

    @Test
    void attemptsStartAtOne() {
        assertThatThrownBy(() -> Delivery.builder("e").attempt(0).build())
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("attempt")
                .hasMessageContaining("0");
    }

    @Test
    void deliveriesAreImmutableValues() {
        byte[] payload = {1, 2, 3};
        Map<String, String> headers = new java.util.HashMap<>(Map.of("k", "v"));
        Delivery d = Delivery.builder("e").payload(payload).headers(headers).build();
        payload[0] = 9;
        headers.put("k2", "v2");
        d.payload()[1] = 9;
        assertThat(d.payload()).containsExactly(1, 2, 3);
        assertThat(d.headers()).containsOnlyKeys("k");
        assertThat(d)
                .isEqualTo(Delivery.builder("e")
                        .payload(new byte[] {1, 2, 3})
                        .headers(Map.of("k", "v"))
                        .build());
        Delivery again = d.redelivery();
        assertThat(again.attempt()).isEqualTo(2);
        assertThat(again.redelivered()).isTrue();
        assertThat(again.eventId()).isEqualTo("e");
    }

    @Test
    void aHandedOverPayloadIsKeptWithoutACopyAndTheNextConstructorCopiesAgain() {
        var threads = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        byte[] body = new byte[1 << 20];
        body[0] = 1;
        Delivery.handingOver(
                "warm", "", new byte[1], Map.of(), 1, false, ""); // the class loaded and the method run once
        long before = threads.getCurrentThreadAllocatedBytes();
        Delivery kept = Delivery.handingOver("e", "t", body, Map.of("k", "v"), 2, true, "kafka:t/0@1");
        long handingOver = threads.getCurrentThreadAllocatedBytes() - before;
        before = threads.getCurrentThreadAllocatedBytes();
        Delivery copied = new Delivery("e", "t", body, Map.of("k", "v"), 2, true, "kafka:t/0@1");
        long constructor = threads.getCurrentThreadAllocatedBytes() - before;
        assertThat(handingOver)
                .as("bytes allocated handing a 1 MiB payload over")
                .isLessThan(1 << 16);
        assertThat(constructor).as("bytes allocated constructing with it").isGreaterThanOrEqualTo(1 << 20);
        assertThat(kept).isEqualTo(copied);
        // the constructor after a hand-over copies again: a later write to the array reaches only the owner
        body[0] = 2;
        assertThat(copied.payload()[0]).isEqualTo((byte) 1);
        assertThat(kept.payload()[0]).isEqualTo((byte) 2);
        assertThat(Delivery.handingOver("e", null, null, null, 1, false, null))
                .isEqualTo(new Delivery("e", "", new byte[0], Map.of(), 1, false, ""));
        assertThatThrownBy(() -> Delivery.handingOver(" ", "", body, Map.of(), 1, false, ""))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("blank");
        assertThatThrownBy(() -> Delivery.handingOver("e", "", body, Map.of(), 0, false, ""))
                .isInstanceOf(InvalidDeliveryException.class)
                .hasMessageContaining("attempt");
        // a failed hand-over leaves nothing behind: the next constructor with the same array copies it
        Delivery after = new Delivery("e", "", body, Map.of(), 1, false, "");
        body[0] = 3;
        assertThat(after.payload()[0]).isEqualTo((byte) 2);
    }

    @Test
    void aDeliveryPrintsItsHeaderNamesButNotTheirValues() {
        // Headers carry tokens (authorization, signatures): a logged Delivery must not carry them.
        Delivery d = Delivery.builder("evt-1")
                .headers(Map.of("authorization", "Bearer s3cr3t-token", "x-signature", "sig-value"))
                .build();
        assertThat(d.toString())
                .contains("evt-1", "authorization", "x-signature")
                .doesNotContain("s3cr3t-token", "sig-value");
    }

    @ParameterizedTest
    @ValueSource(strings = {"billing; drop table", "Billing", "", "a b"})
    void badConsumerNamesAreRejectedByName(String name) {
        assertThatThrownBy(() -> IdempotentConsumer.builder().consumer(name))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("[a-z0-9._-]{1,100}")
                .hasMessageContaining("'" + name + "'");
    }

    @Test
    void aTooLongConsumerNameIsRejected() {
        assertThatThrownBy(() -> IdempotentConsumer.builder().consumer("c".repeat(101)))
                .isInstanceOf(InvalidConfigurationException.class);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "once_; drop table x",
                "Once_",
                "1once",
                "once-",
                "\"once\"",
                "a_very_long_prefix_that_is_over_30_"
            })
    void aTablePrefixThatIsNotAnIdentifierIsRejected(String prefix) {
        assertThatThrownBy(() -> TablePrefix.validate(prefix))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("'" + prefix + "'");
        assertThatThrownBy(() -> IdempotentConsumer.builder().tablePrefix(prefix))
                .isInstanceOf(InvalidConfigurationException.class);
        assertThatThrownBy(() -> Schema.migrations(Dialects.POSTGRESQL, prefix))
                .isInstanceOf(InvalidConfigurationException.class);
        assertThatThrownBy(() -> Schema.freshDatabaseStatements(Dialects.POSTGRESQL, prefix))
                .isInstanceOf(InvalidConfigurationException.class);
    }

    @Test
    void aNullTablePrefixIsRejected() {
        assertThatThrownBy(() -> TablePrefix.validate(null))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("null");
    }

    @Test
    void lockTimeoutsOutsideTheirRangeAreRefusedNotClamped() {
        assertThatThrownBy(() -> IdempotentConsumer.builder().lockTimeout(Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("PT0S");
        assertThatThrownBy(() -> IdempotentConsumer.builder().lockTimeout(Duration.ofHours(2)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("PT2H");
        assertThatThrownBy(() -> IdempotentConsumer.builder().maxConflictRetries(-1))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("-1");
    }

    @Test
    void buildNamesWhatIsMissing() {
        assertThatThrownBy(
                        () -> IdempotentConsumer.builder().consumer("billing").build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("dataSource")
                .hasMessageContaining("handler");
    }

    @Test
    void aRetentionShorterThanTheRedeliveryHorizonIsRefused() {
        assertThatThrownBy(() -> InboxPruner.builder()
                        .dataSource(new NoDataSource())
                        .dialect(Dialects.POSTGRESQL)
                        .retention(Duration.ofDays(1))
                        .redeliveryHorizon(Duration.ofDays(4))
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("PT24H")
                .hasMessageContaining("PT96H");
    }

    @Test
    void unknownDialectsAreNamed() {
        assertThatThrownBy(() -> Dialects.byName("oracle"))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("'oracle'");
    }

    @Test
    void mysqlIsRefusedWithWhatIsSupported() {
        // Issue 10 item 10: "mysql" used to map to the MariaDB dialect, whose INSERT ... RETURNING and
        // SET STATEMENT do not exist on MySQL. "MySQL" is what both JDBC drivers report for a MySQL server.
        for (String product : java.util.List.of("MySQL", "mysql")) {
            assertThatThrownBy(() -> Dialects.byName(product))
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("'" + product + "' is not supported")
                    .hasMessageContaining("PostgreSQL")
                    .hasMessageContaining("MariaDB 10.6+");
        }
        assertThat(Dialects.byName("MariaDB")).isSameAs(Dialects.MARIADB);
    }

    @Test
    void everyDialectShipsItsMigrationsWithThePrefixApplied() {
        for (var dialect : java.util.List.of(Dialects.POSTGRESQL, Dialects.MARIADB)) {
            String script = Schema.script(dialect, "billing_");
            assertThat(script)
                    .contains(
                            "billing_inbox",
                            "billing_outbox",
                            "billing_idempotency_key",
                            "billing_lease",
                            "billing_fence")
                    .doesNotContain("${prefix}");
        }
    }

    @Test
    void leaseNamesAndTtlsOutsideTheirRangeAreConfigurationErrors() {
        Leases leases = Leases.builder()
                .dataSource(new NoDataSource())
                .dialect(Dialects.POSTGRESQL)
                .build();
        assertThatThrownBy(() -> leases.acquire(" ", "worker-7", Duration.ofSeconds(10)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("lease name")
                .hasMessageContaining("' '");
        assertThatThrownBy(() -> leases.acquire("settlement", "w".repeat(256), Duration.ofSeconds(10)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("lease owner")
                .hasMessageContaining("1 to 255");
        assertThatThrownBy(() -> leases.acquire("settlement", "worker-7", Duration.ofDays(2)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("PT48H")
                .hasMessageContaining("PT24H");
        Lease held = new Lease("settlement", "worker-7", 1, java.time.Instant.EPOCH);
        assertThatThrownBy(() -> leases.renew(held, Duration.ZERO))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("PT0S");
    }

    @Test
    void aBlankFencedResourceIsAConfigurationError() {
        java.sql.Connection unused = (java.sql.Connection) java.lang.reflect.Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {java.sql.Connection.class}, (proxy, method, args) -> {
                    throw new AssertionError("no I/O expected");
                });
        assertThatThrownBy(() -> Fence.check(unused, Dialects.POSTGRESQL, "once_", "", 1, java.time.Clock.systemUTC()))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("fenced resource")
                .hasMessageContaining("''");
    }

    /** A DataSource that is never asked for a connection. */
    private static final class NoDataSource implements javax.sql.DataSource {
        public java.sql.Connection getConnection() {
            throw new AssertionError("no I/O expected");
        }

        public java.sql.Connection getConnection(String u, String p) {
            throw new AssertionError("no I/O expected");
        }

        public java.io.PrintWriter getLogWriter() {
            return null;
        }

        public void setLogWriter(java.io.PrintWriter out) {}

        public void setLoginTimeout(int seconds) {}

        public int getLoginTimeout() {
            return 0;
        }

        public java.util.logging.Logger getParentLogger() {
            return null;
        }

        public <T> T unwrap(Class<T> iface) {
            return null;
        }

        public boolean isWrapperFor(Class<?> iface) {
            return false;
        }
    }
}
