package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Inbox;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The MariaDB batch claim: one multi-row {@code INSERT IGNORE … RETURNING} per batch (MariaDB
 * 10.5+ returns only the rows it inserted), counted with the session's {@code Com_insert}.
 */
class BatchClaimMariaDbTest {

    private TestDatabase db;
    private final Inbox inbox = Inbox.of(Dialects.MARIADB);

    @BeforeEach
    void setUp() {
        db = TestMariaDb.shared().freshDatabase(2);
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    @Test
    void mariaDbClaimsABatchInOneStatement() throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            inbox.claimAll(c, "batch", List.of("evt-003", "evt-050"));
            c.commit();
            List<String> ids = new ArrayList<>();
            for (int i = 99; i >= 0; i--) {
                ids.add(String.format("evt-%03d", i));
            }
            ids.add("evt-007"); // a copy inside the batch counts once

            long before = inserts(c);
            Set<String> claimed = inbox.claimAll(c, "batch", ids);
            long statements = inserts(c) - before;
            c.commit();

            Set<String> expected = new HashSet<>(ids);
            expected.removeAll(Set.of("evt-003", "evt-050"));
            assertThat(statements)
                    .as("INSERT statements for a batch of 100 ids")
                    .isEqualTo(1);
            assertThat(claimed).as("exactly the ids this transaction inserted").isEqualTo(expected);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(100);
        }
    }

    @Test
    void aBatchLargerThanOneStatementTakesIsClaimedInSortedChunks() throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 2_500; i++) {
                ids.add("evt-" + i);
            }
            long before = inserts(c);
            Set<String> claimed = inbox.claimAll(c, "batch", ids);
            long statements = inserts(c) - before;
            c.commit();

            assertThat(claimed).hasSize(2_500);
            assertThat(statements).as("chunks of at most 1,000 ids").isEqualTo(3);
        }
    }

    private static long inserts(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SHOW SESSION STATUS LIKE 'Com_insert'")) {
            rs.next();
            return rs.getLong(2);
        }
    }
}
