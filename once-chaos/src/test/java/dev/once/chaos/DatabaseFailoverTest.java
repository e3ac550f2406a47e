package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Schema;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Predicate;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * R14, database failover: two PostgreSQL servers of the test's own ({@link LocalPostgres}) with
 * streaming replication; the consumer's pool reaches them through one multi-host URL
 * ({@code targetServerType=primary}). Mid-run the replication link is partitioned (a
 * {@link FaultProxy} between standby and primary, frozen), the primary is SIGKILLed with the
 * partition still up, and the standby is promoted, so whatever the primary committed but never
 * shipped is gone. Run twice: with a synchronous standby every acknowledged commit was on the
 * standby, so nothing acknowledged is lost and the redeliveries of unacknowledged commits are
 * absorbed ({@code lost=0 applied_twice=0}, asserted); with an asynchronous one the events
 * acknowledged during the partition are lost (reported, not asserted: it is what the README's
 * production checklist warns against).
 */
@Tag("chaos")
class DatabaseFailoverTest {

    /** How long the replication link stays partitioned before the primary dies, at most. */
    private static final Duration PARTITION = Duration.ofMillis(800);

    @Test
    void aSynchronousStandbyLosesNothingAndAppliesNothingTwiceThroughAFailover() throws Exception {
        Chaos.Figure f = failover(true);
        assertThat(f.get("lost"))
                .as("acknowledged events missing after the failover")
                .isZero();
        assertThat(f.get("applied_twice")).as("events applied more than once").isZero();
    }

    /** The deliberate break of the test above: the same run with an asynchronous standby. */
    @Test
    void anAsynchronousStandbyLosesWhatWasAcknowledgedButNotShipped() throws Exception {
        Chaos.Figure f = failover(false);
        assertThat(f.get("acked_during_partition"))
                .as("the partition must have overlapped acknowledgements for the figure to mean anything")
                .isPositive();
    }

    private static Chaos.Figure failover(boolean synchronous) throws Exception {
        LocalPostgres.assumeAvailable();
        int events = Chaos.scaled(3_000);
        String mode = synchronous ? "sync" : "async";
        Path root = LocalPostgres.tempRoot("failover-" + mode);
        long started = System.nanoTime();
        try (LocalPostgres primary = LocalPostgres.primary(
                        root,
                        "primary",
                        "127.0.0.1",
                        List.of(),
                        synchronous
                                ? Map.of("synchronous_standby_names", "standby", "synchronous_commit", "on")
                                : Map.of("synchronous_standby_names", "", "synchronous_commit", "on"));
                FaultProxy replication =
                        FaultProxy.start(new InetSocketAddress("127.0.0.1", primary.port()), WireProtocol.RAW);
                LocalPostgres standby = standbyThrough(primary, replication, root)) {
            awaitStreaming(primary, synchronous);
            try (HikariDataSource setup = Databases.pool(primary.jdbcUrl(), 1, "failover-setup")) {
                Schema.migrate(setup);
                Effects.create(setup);
            }
            String url = "jdbc:postgresql://" + primary.hostPort() + "," + standby.hostPort()
                    + "/postgres?user=postgres&targetServerType=primary&hostRecheckSeconds=1";
            try (HikariDataSource ds = Databases.pool(url, 4, "failover-" + mode)) {
                IdempotentConsumer once = IdempotentConsumer.builder()
                        .dataSource(ds)
                        .consumer("failover")
                        .handler(Effects.HANDLER)
                        .build();
                Broker broker = NetworkFaultsUnderLoadTest.publish(events, new Random(17));
                Predicate<Delivery> consumer = d -> {
                    try {
                        return once.process(d).shouldAcknowledge();
                    } catch (RuntimeException e) {
                        return false; // no pool connection while no server is primary: redelivered
                    }
                };
                try (Load load = new Load(broker, 4, consumer)) {
                    await("a third of the events")
                            .atMost(Duration.ofMinutes(1))
                            .until(() -> broker.acks() >= events / 3);
                    // The fault: replication partitioned, then the primary dies before the partition heals.
                    long acksBefore = broker.acks();
                    long partitionAt = System.nanoTime();
                    replication.freeze();
                    await("acknowledgements during the partition, or its end")
                            .atMost(Duration.ofSeconds(10))
                            .pollInterval(Duration.ofMillis(20))
                            .until(() -> broker.acks() - acksBefore >= 200
                                    || System.nanoTime() - partitionAt >= PARTITION.toNanos());
                    primary.kill();
                    long ackedDuringPartition = broker.acks() - acksBefore;
                    replication.reset(); // what the frozen link held back never reaches the standby
                    long killedAt = System.nanoTime();
                    standby.promote();
                    double promoteSeconds = (System.nanoTime() - killedAt) / 1e9;
                    load.awaitDrained("every event acknowledged by the new primary", Duration.ofMinutes(1));
                    double failoverSeconds = firstAckAfter(load, killedAt);
                    load.check();
                    Map<String, Long> counts = Effects.counts(ds);
                    return Chaos.figure("failover")
                            .rounds(events)
                            .lost(Effects.lost(broker.acknowledged(), counts))
                            .appliedTwice(Effects.appliedTwice(counts))
                            .put("replication", synchronous ? "synchronous" : "asynchronous")
                            .put("acked_during_partition", ackedDuringPartition)
                            .put("deliveries", broker.deliveries())
                            .put("redeliveries", broker.redeliveries())
                            .put("promote_s", promoteSeconds)
                            .put("kill_to_first_ack_s", failoverSeconds)
                            .put("total_s", (System.nanoTime() - started) / 1e9)
                            .broken(synchronous ? null : "async_standby")
                            .print();
                }
            }
        } finally {
            LocalPostgres.delete(root);
        }
    }

    /** A standby whose replication connection goes through {@code proxy}, so the test can partition it. */
    private static LocalPostgres standbyThrough(LocalPostgres primary, FaultProxy proxy, Path root) throws Exception {
        // pg_basebackup -R points the standby at the primary itself; the setting appended after it wins.
        return primary.standby(
                root,
                "standby",
                "primary_conninfo = 'host=127.0.0.1 port=" + proxy.port()
                        + " user=postgres application_name=standby'\n");
    }

    private static void awaitStreaming(LocalPostgres primary, boolean synchronous) {
        await("the standby streaming through the proxy" + (synchronous ? " as the synchronous standby" : ""))
                .atMost(Duration.ofSeconds(30))
                .ignoreExceptions()
                .until(() -> {
                    try (Connection c = DriverManager.getConnection(primary.jdbcUrl());
                            Statement s = c.createStatement();
                            ResultSet rs = s.executeQuery("SELECT sync_state FROM pg_stat_replication"
                                    + " WHERE state = 'streaming' AND application_name = 'standby'"
                                    + " AND client_port IS NOT NULL")) {
                        return rs.next() && rs.getString(1).equals(synchronous ? "sync" : "async");
                    }
                });
    }

    /** Seconds from the kill to the first acknowledgement after it (the consumer working on the new primary). */
    private static double firstAckAfter(Load load, long killedAt) {
        long at = load.recoveredAt(killedAt, 1, Duration.ofMillis(100));
        return at < 0 ? -1 : (at - killedAt) / 1e9;
    }
}
