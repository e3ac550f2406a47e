package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.testkit.fault.CommitFault;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testsupport.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import javax.sql.DataSource;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * R2, the unknown commit outcome: the proxy drops the COMMIT request (rolled back) or the
 * server's reply to it (committed) at random and resets the connection; the client sees the same
 * broken connection either way. The broker (a queue here) redelivers what was not acknowledged.
 * The engine must leave every failed commit unacknowledged, and the inbox must absorb the
 * redelivery of those that did commit.
 */
@Tag("chaos")
class UnknownCommitOutcomeTest {

    /** How a consumer under test turns a delivery into "acknowledge or not". */
    enum Variant {
        /** The engine: acknowledge exactly when the outcome says so. */
        ONCE,
        /** Deliberately broken: no claim; apply, commit, acknowledge if the commit call returned. */
        NAIVE,
        /** Deliberately broken: the engine, but acknowledging whatever the outcome (an ack before the commit is known). */
        ACK_REGARDLESS
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Databases.class)
    void unknownCommitOutcomeLosesNothingAndAppliesNothingTwice(Databases database) throws Exception {
        // 100 rounds (was 200) give each fault about 33 times a database, both asserted positive;
        // the reliability profile multiplies the count (Chaos.scaled).
        Chaos.Figure f = run(database, Variant.ONCE, Chaos.scaled(100));
        assertThat(f.get("reply_dropped"))
                .as("rounds whose commit happened but whose reply was dropped")
                .isPositive();
        assertThat(f.get("request_dropped"))
                .as("rounds whose commit request was dropped")
                .isPositive();
        assertThat(f.get("lost")).as("acknowledged events without their effect").isZero();
        assertThat(f.get("applied_twice"))
                .as("events whose effect was applied more than once")
                .isZero();
    }

    /** The test can fail: the same faults against a consumer without the claim apply effects twice. */
    @Test
    void theSameFaultsCatchAConsumerWithoutTheClaim() throws Exception {
        Chaos.Figure f = run(Databases.POSTGRES, Variant.NAIVE, 50);
        assertThat(f.get("applied_twice"))
                .as("a dropped COMMIT reply, redelivered to a consumer without a claim")
                .isPositive();
    }

    /** The test can fail: acknowledging a delivery whose commit failed loses the events that did not commit. */
    @Test
    void theSameFaultsCatchAnAcknowledgementOfAFailedCommit() throws Exception {
        Chaos.Figure f = run(Databases.POSTGRES, Variant.ACK_REGARDLESS, 50);
        assertThat(f.get("lost"))
                .as("a dropped COMMIT request, acknowledged anyway")
                .isPositive();
    }

    private static Chaos.Figure run(Databases database, Variant variant, int rounds) throws Exception {
        long seed = Long.getLong("once.chaos.seed", System.nanoTime());
        Random random = new Random(seed);
        try (TestDatabase db = database.fresh(2);
                FaultProxy proxy = FaultProxy.forJdbcUrl(database.directUrl(db));
                HikariDataSource ds = Databases.pool(proxy.jdbcUrl(database.directUrl(db)), 2, "unknown-commit")) {
            Effects.create(db);
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(ds)
                    .consumer("unknown-commit")
                    .handler(Effects.HANDLER)
                    .build();
            Deque<Delivery> broker = new ArrayDeque<>();
            for (int i = 0; i < rounds; i++) {
                broker.add(Delivery.of("evt-" + i, "round " + i));
            }
            Set<String> acknowledged = new HashSet<>();
            long deliveries = 0;
            long replyDropped = 0;
            long requestDropped = 0;
            while (!broker.isEmpty()) {
                Delivery d = broker.poll();
                deliveries++;
                // A fault on two of three first deliveries and fewer later, so every event ends.
                CommitFault fault = d.attempt() > 3
                        ? null
                        : switch (random.nextInt(3)) {
                            case 0 -> CommitFault.DROP_REPLY;
                            case 1 -> CommitFault.DROP_REQUEST;
                            default -> null;
                        };
                if (fault != null) {
                    proxy.failNextCommit(fault);
                }
                long failedBefore = proxy.commitsFailed();
                boolean ack = process(variant, once, ds, d);
                proxy.disarm();
                if (proxy.commitsFailed() > failedBefore) {
                    if (fault == CommitFault.DROP_REPLY) {
                        replyDropped++;
                    } else {
                        requestDropped++;
                    }
                }
                if (ack) {
                    acknowledged.add(d.eventId());
                } else {
                    broker.addLast(d.redelivery());
                }
            }
            Map<String, Long> counts = Effects.counts(db);
            return Chaos.figure("unknown-commit")
                    .rounds(rounds)
                    .lost(Effects.lost(acknowledged, counts))
                    .appliedTwice(Effects.appliedTwice(counts))
                    .put("db", database.name().toLowerCase())
                    .put("consumer", variant.name().toLowerCase())
                    .put("deliveries", deliveries)
                    .put("reply_dropped", replyDropped)
                    .put("request_dropped", requestDropped)
                    .put("seed", seed)
                    .broken(variant == Variant.ONCE ? null : variant.name().toLowerCase())
                    .print();
        }
    }

    private static boolean process(Variant variant, IdempotentConsumer once, DataSource ds, Delivery d) {
        return switch (variant) {
            case ONCE -> once.process(d).shouldAcknowledge();
            case ACK_REGARDLESS -> {
                once.process(d);
                yield true;
            }
            case NAIVE -> {
                try (Connection c = ds.getConnection()) {
                    c.setAutoCommit(false);
                    Effects.apply(c, d);
                    c.commit();
                    yield true;
                } catch (SQLException e) {
                    yield false;
                }
            }
        };
    }
}
