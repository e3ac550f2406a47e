package dev.once.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.ClaimTiming;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The benchmark's correctness harness run against {@code once}, every case at full size (the
 * concurrent case is the full 1,000 rounds of 8 threads), asserting nothing applied twice and
 * nothing lost. Two deliberately broken subjects show the harness catches both kinds of error.
 */
class CorrectnessTest {

    private static BenchPostgres postgres;

    @BeforeAll
    static void start() throws Exception {
        postgres = BenchPostgres.start(TestPostgres.shared().jdbcUrl());
    }

    @AfterAll
    static void stop() throws Exception {
        postgres.close();
    }

    static Stream<Arguments> timingsAndCases() {
        return Stream.of(ClaimTiming.values())
                .flatMap(timing -> Stream.of(
                                Correctness.SEQUENTIAL_DUPLICATE,
                                Correctness.CRASH_AFTER_COMMIT,
                                Correctness.CONCURRENT_DUPLICATE,
                                Correctness.IDENTICAL_PAYLOADS,
                                Correctness.CRASH_BEFORE_COMMIT)
                        .map(kase -> Arguments.of(timing, kase)));
    }

    @ParameterizedTest
    @MethodSource("timingsAndCases")
    void onceAppliesEveryEffectExactlyOnce(ClaimTiming timing, String kase) throws Exception {
        assertExactlyOnce(Subjects.once(timing), kase);
    }

    private void assertExactlyOnce(Subject.Kind once, String kase) throws Exception {
        Correctness.Result result = new Correctness(postgres).run(once, kase);

        assertThat(result.rounds())
                .as("rounds of %s", kase)
                .isEqualTo(kase.equals(Correctness.CONCURRENT_DUPLICATE) ? 1_000 : Correctness.ROUNDS);
        assertThat(result.appliedTwice()).as("%s: effects applied twice", kase).isZero();
        assertThat(result.lost()).as("%s: effects lost", kase).isZero();
    }

    @Test
    void harnessCountsEffectsAppliedTwiceByAConsumerWithoutDedupe() throws Exception {
        Correctness correctness = new Correctness(postgres);

        assertThat(correctness
                        .run(WITHOUT_DEDUPE, Correctness.SEQUENTIAL_DUPLICATE)
                        .appliedTwice())
                .as("every round's second delivery applies again")
                .isEqualTo(Correctness.ROUNDS);
        assertThat(correctness
                        .run(WITHOUT_DEDUPE, Correctness.CRASH_AFTER_COMMIT)
                        .appliedTwice())
                .as("every redelivery after the lost ack applies again")
                .isEqualTo(Correctness.ROUNDS);
        assertThat(correctness
                        .run(WITHOUT_DEDUPE, Correctness.IDENTICAL_PAYLOADS)
                        .appliedTwice())
                .as("two distinct events are not a duplicate")
                .isZero();
    }

    @Test
    void harnessCountsEffectsLostByAConsumerThatAcknowledgesWithoutApplying() throws Exception {
        Correctness.Result result = new Correctness(postgres).run(ACK_ONLY, Correctness.IDENTICAL_PAYLOADS);

        assertThat(result.lost()).isEqualTo(2L * Correctness.ROUNDS);
        assertThat(result.appliedTwice()).isZero();
    }

    /** The naive consumer: applies every delivery. */
    private static final Subject.Kind WITHOUT_DEDUPE = new TestKind("without-dedupe", true);
    /** Acknowledges and does nothing (as an ack-first consumer that crashed would). */
    private static final Subject.Kind ACK_ONLY = new TestKind("ack-only", false);

    private record TestKind(String name, boolean apply) implements Subject.Kind {
        @Override
        public String description() {
            return name;
        }

        @Override
        public void createStore(DataSource dataSource) {}

        @Override
        public Subject open(DataSource dataSource) {
            return e -> {
                if (apply) {
                    try (Connection c = dataSource.getConnection();
                            PreparedStatement ps = c.prepareStatement(Ledger.CREDIT)) {
                        ps.setLong(1, e.amount());
                        ps.setLong(2, e.account());
                        ps.executeUpdate();
                    }
                }
                return true;
            };
        }
    }
}
