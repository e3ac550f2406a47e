package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The one-id claim with the consumer's name written into its text ({@code Dialect.claimNewFor}, issue 21): two
 * binds per claim where there were three. Names reach it validated ({@code [a-z0-9._-]}), so a quote or a
 * backslash never gets there through the engine; the literal is escaped all the same, and these names, which
 * validation would refuse, are stored exactly as given whatever {@code standard_conforming_strings} says.
 */
class ClaimNewForTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase(1);
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"billing", "o'brien", "'); DROP TABLE once_inbox; --", "back\\slash", "it's\\'both"})
    void aNameWithAQuoteOrABackslashIsStoredAsGivenAndNothingElseRuns(String name) throws SQLException {
        for (String conforming : List.of("on", "off")) {
            for (Duration lockTimeout : new Duration[] {null, Duration.ofSeconds(2)}) {
                String sql = Dialects.POSTGRESQL.claimNewFor(TablePrefix.DEFAULT, lockTimeout, name);
                String id = "evt-" + conforming + "-" + (lockTimeout == null ? "no-timeout" : "timeout");
                try (Connection c = db.dataSource().getConnection()) {
                    c.setAutoCommit(false);
                    sql(c, "SET LOCAL standard_conforming_strings = " + conforming);
                    try (PreparedStatement ps = c.prepareStatement(sql)) {
                        ps.setString(1, id); // 1 event_id: the name is no parameter
                        Dialects.POSTGRESQL.bindProcessedAt(ps, 2, Instant.now()); // 2 processed_at
                        assertThat(ps.execute()).as(sql).isFalse();
                        assertThat(ps.getUpdateCount()).as(sql).isEqualTo(1);
                    }
                    c.commit();
                    c.setAutoCommit(true);
                }
                assertThat(consumersOf(id)).as(sql).contains(name);
            }
        }
        assertThat(consumersOf("evt-on-no-timeout")).containsExactly(name);
    }

    /**
     * The statement text is the consumer's, built once: pgjdbc prepares it on the server after its {@code
     * prepareThreshold} (5) executions on a connection, which it could not if the text changed per claim.
     */
    @Test
    void theNamedClaimIsPreparedOnTheServerAfterTheDriversThreshold() throws Exception {
        List<String> prepared = new ArrayList<>();
        IdempotentConsumer billing = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .handler((d, tx) -> {
                    prepared.clear();
                    try (Statement s = tx.connection().createStatement();
                            ResultSet rs = s.executeQuery("SELECT statement FROM pg_prepared_statements")) {
                        while (rs.next()) {
                            prepared.add(rs.getString(1));
                        }
                    }
                })
                .build();
        for (int i = 1; i <= 8; i++) {
            assertThat(billing.process(Delivery.of("evt-" + i, "x")).status()).isEqualTo(Status.APPLIED);
        }
        assertThat(prepared)
                .as("the claim, with the name as a literal and two parameters, prepared on the server")
                .anySatisfy(s -> assertThat(s)
                        .startsWith("INSERT INTO \"once_inbox\"")
                        .contains("VALUES ('billing', $1, ")
                        .doesNotContain("$3"));
    }

    private List<String> consumersOf(String eventId) throws SQLException {
        List<String> consumers = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT consumer FROM once_inbox WHERE event_id = ?")) {
            ps.setString(1, eventId);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    consumers.add(rs.getString(1));
                }
            }
        }
        return consumers;
    }

    private static void sql(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }
}
