package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Schema;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * PostgreSQL HA as operators run it: Patroni with etcd ({@link LocalPatroni}), two members, the
 * consumer's pool on one multi-host URL ({@code targetServerType=primary}). Under load the
 * replication link to the leader is partitioned, the leader's machine dies (Patroni and PostgreSQL
 * SIGKILLed) and Patroni promotes the replica once the leader key expires in etcd. With
 * {@code synchronous_mode: true} every acknowledged commit was on the replica: lost 0 and applied
 * twice 0, asserted. With it off, what was acknowledged during the partition is gone: measured and
 * printed, the deliberate break (what the production checklist in README.md warns against).
 *
 * <p>Each test has a cluster of its own, and both start at once before the first test: a start is
 * mostly waiting (initdb, Patroni's loop, the replica's base backup), half of each test's time when
 * they started one after the other.
 */
@Tag("chaos")
class PatroniFailoverTest {

    /** How long the replication link stays partitioned before the leader dies, at most. */
    private static final Duration PARTITION = Duration.ofMillis(800);

    /** The cluster of each mode, until its test takes it (and closes it). */
    private static final Map<Boolean, CompletableFuture<Started>> CLUSTERS = new HashMap<>();

    /** A cluster and the seconds its start took. */
    private record Started(LocalPatroni patroni, double seconds) {}

    @BeforeAll
    static void startBothClusters() {
        LocalPatroni.assumeAvailable();
        for (boolean synchronous : new boolean[] {true, false}) {
            // a thread each: the common pool has one thread on two cores, and would start them one after the other
            CLUSTERS.put(
                    synchronous,
                    CompletableFuture.supplyAsync(
                            () -> {
                                long started = System.nanoTime();
                                try {
                                    return new Started(
                                            LocalPatroni.start(2, synchronous), (System.nanoTime() - started) / 1e9);
                                } catch (Exception e) {
                                    throw new CompletionException(e);
                                }
                            },
                            task -> new Thread(task, "patroni-start-" + (synchronous ? "sync" : "async")).start()));
        }
    }

    /** What a test did not close (it failed before it took its cluster, or did not run). */
    @AfterAll
    static void closeClusters() throws Exception {
        for (CompletableFuture<Started> f : CLUSTERS.values()) {
            Started s = f.exceptionally(e -> null).join();
            if (s != null) {
                s.patroni().close();
            }
        }
        CLUSTERS.clear();
    }

    @Test
    void patroniInSynchronousModeLosesNothingThroughAFailover() throws Exception {
        Chaos.Figure f = failover(true);
        assertThat(f.get("lost"))
                .as("acknowledged events missing after the failover")
                .isZero();
        assertThat(f.get("applied_twice")).as("events applied more than once").isZero();
    }

    @Test
    void patroniInAsynchronousModeLosesWhatWasAcknowledgedButNotShipped() throws Exception {
        Chaos.Figure f = failover(false);
        assertThat(f.get("applied_twice")).as("events applied more than once").isZero();
        assertThat(f.get("acked_during_partition"))
                .as("the partition must have overlapped acknowledgements for the figure to mean anything")
                .isPositive();
    }

    private static Chaos.Figure failover(boolean synchronous) throws Exception {
        int events = Chaos.scaled(3_000);
        String mode = synchronous ? "sync" : "async";
        Started cluster;
        try {
            cluster = CLUSTERS.remove(synchronous).join();
        } catch (CompletionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
        long started = System.nanoTime();
        try (LocalPatroni patroni = cluster.patroni()) {
            double startSeconds = cluster.seconds();
            LocalPatroni.Member leader = patroni.leader();
            assertThat(leader).as("a leader").isNotNull();
            try (HikariDataSource setup = Databases.pool(leader.jdbcUrl(), 1, "patroni-setup")) {
                Schema.migrate(setup);
                Effects.create(setup);
            }
            String url = "jdbc:postgresql://" + patroni.hosts()
                    + "/postgres?user=postgres&targetServerType=primary&hostRecheckSeconds=1";
            try (HikariDataSource ds = Databases.pool(url, 4, "patroni-" + mode)) {
                IdempotentConsumer once = IdempotentConsumer.builder()
                        .dataSource(ds)
                        .consumer("patroni")
                        .handler(Effects.HANDLER)
                        .build();
                Broker broker = NetworkFaultsUnderLoadTest.publish(events, new Random(29));
                Predicate<Delivery> consumer = d -> {
                    try {
                        return once.process(d).shouldAcknowledge();
                    } catch (RuntimeException e) {
                        return false; // no primary while Patroni fails over: redelivered
                    }
                };
                long loadStarted = System.nanoTime();
                try (Load load = new Load(broker, 4, consumer)) {
                    await("a third of the events")
                            .atMost(Duration.ofMinutes(1))
                            .until(() -> broker.acks() >= events / 3);
                    double rate = broker.acks() / ((System.nanoTime() - loadStarted) / 1e9);
                    long acksBefore = broker.acks();
                    long partitionAt = System.nanoTime();
                    leader.replication.freeze();
                    await("acknowledgements during the partition, or its end")
                            .atMost(Duration.ofSeconds(10))
                            .pollInterval(Duration.ofMillis(20))
                            .until(() -> broker.acks() - acksBefore >= 200
                                    || System.nanoTime() - partitionAt >= PARTITION.toNanos());
                    patroni.kill(leader);
                    long ackedDuringPartition = broker.acks() - acksBefore;
                    leader.replication.reset(); // what the frozen link held back never reaches the replica
                    long killedAt = System.nanoTime();
                    await("Patroni promoting the replica")
                            .atMost(Duration.ofMinutes(1))
                            .until(() -> patroni.leader() != null);
                    double promoteSeconds = (System.nanoTime() - killedAt) / 1e9;
                    load.awaitDrained("every event acknowledged by the new leader", Duration.ofMinutes(2));
                    long at = load.recoveredAt(killedAt, 1, Duration.ofMillis(100));
                    load.check();
                    Map<String, Long> counts = Effects.counts(ds);
                    return Chaos.figure("patroni-failover")
                            .rounds(events)
                            .lost(Effects.lost(broker.acknowledged(), counts))
                            .appliedTwice(Effects.appliedTwice(counts))
                            .put("synchronous_mode", synchronous)
                            .put("members", 2)
                            .put("acked_during_partition", ackedDuringPartition)
                            .put("deliveries", broker.deliveries())
                            .put("redeliveries", broker.redeliveries())
                            .put("events_per_s_before_fault", rate)
                            .put("cluster_start_s", startSeconds)
                            .put("kill_to_new_leader_s", promoteSeconds)
                            .put("kill_to_first_ack_s", at < 0 ? -1.0 : (at - killedAt) / 1e9)
                            .put("total_s", startSeconds + (System.nanoTime() - started) / 1e9)
                            .broken(synchronous ? null : "synchronous_mode_off")
                            .print();
                }
            }
        }
    }
}
