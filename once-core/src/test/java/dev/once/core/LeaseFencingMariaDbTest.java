package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.lease.Fence;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import org.junit.jupiter.api.Test;

/**
 * {@link LeaseScenarios} on MariaDB, and the fence on it: InnoDB's default is REPEATABLE READ, where a
 * plain read sees the transaction's snapshot.
 */
class LeaseFencingMariaDbTest extends LeaseScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestMariaDb.shared().freshDatabase(RACERS + 2);
    }

    @Override
    String ledgerTable() {
        return "CREATE TABLE ledger_write (id bigint AUTO_INCREMENT PRIMARY KEY, round int NOT NULL,"
                + " writer varchar(20) NOT NULL, token bigint NOT NULL)";
    }

    /**
     * Issue 10 item 6, the confirmed sequence: token 4 is accepted; the holder of 5 begins and reads
     * (its snapshot now shows 4); token 6 is accepted meanwhile; then the holder of 5 checks its
     * token and writes. The check must see 6, not the snapshot's 4, and reject the write.
     */
    @Test
    void mariaDbFenceCheckReadsTheNewestTokenNotItsSnapshot() throws Exception {
        fencedWrite("writer-4", 4);
        try (Connection stale = db.dataSource().getConnection()) {
            stale.setAutoCommit(false);
            assertThat(stale.getTransactionIsolation())
                    .as("InnoDB's default")
                    .isEqualTo(Connection.TRANSACTION_REPEATABLE_READ);
            try (Statement s = stale.createStatement();
                    ResultSet rs = s.executeQuery("SELECT token FROM once_fence WHERE resource = 'ledger'")) {
                rs.next();
                assertThat(rs.getLong(1))
                        .as("the handler's first read fixes its snapshot")
                        .isEqualTo(4);
            }
            fencedWrite("writer-6", 6);
            StaleFencingTokenException rejected = null;
            try {
                Fence.check(stale, Dialects.MARIADB, TablePrefix.DEFAULT, "ledger", 5, Clock.systemUTC());
                try (Statement s = stale.createStatement()) {
                    s.executeUpdate("INSERT INTO ledger_write (round, writer, token) VALUES (0, 'writer-5', 5)");
                }
                stale.commit();
            } catch (StaleFencingTokenException e) {
                stale.rollback();
                rejected = e;
            }
            assertThat(rejected).as("the holder of 5 is rejected").isNotNull();
            assertThat(rejected.newest())
                    .as("the newest token, not the snapshot's")
                    .isEqualTo(6);
        }
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write WHERE writer = 'writer-5'"))
                .as("stale writes committed")
                .isZero();
        assertThat(db.queryLong("SELECT token FROM once_fence WHERE resource = 'ledger'"))
                .isEqualTo(6);
        fencedWrite("writer-6", 6);
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write"))
                .as("equal tokens pass")
                .isEqualTo(3);
    }

    private void fencedWrite(String writer, long token) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            Fence.check(c, Dialects.MARIADB, TablePrefix.DEFAULT, "ledger", token, Clock.systemUTC());
            try (Statement s = c.createStatement()) {
                s.executeUpdate(
                        "INSERT INTO ledger_write (round, writer, token) VALUES (0, '" + writer + "', " + token + ")");
            }
            c.commit();
        }
    }
}
