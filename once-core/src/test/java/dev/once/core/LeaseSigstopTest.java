package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A lease holder frozen with SIGSTOP past its lease's expiry: a rival acquires the lease and
 * writes; when the holder is resumed (SIGCONT) its write is rejected by the fence.
 */
class LeaseSigstopTest {

    @Test
    void aHolderStoppedPastItsLeaseIsFencedOffWhenItResumes() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            db.execute(
                    "CREATE TABLE vault_write (id bigserial PRIMARY KEY, writer text NOT NULL)",
                    "CREATE TABLE vault_go (go int)");
            String base = TestPostgres.shared().jdbcUrl();
            stopHolderPastItsLease(db, base + (base.contains("?") ? "&" : "?") + "currentSchema=" + db.name());
        }
    }

    @Test
    void aHolderStoppedPastItsLeaseIsFencedOffWhenItResumesOnMariaDb() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(4)) {
            db.execute(
                    "CREATE TABLE vault_write (id bigint AUTO_INCREMENT PRIMARY KEY, writer varchar(20) NOT NULL)",
                    "CREATE TABLE vault_go (go int)");
            stopHolderPastItsLease(db, ((HikariDataSource) db.dataSource()).getJdbcUrl());
        }
    }

    /** The scenario on {@code db}, whose JDBC URL for the child is {@code url}; both clocks are the system's. */
    private static void stopHolderPastItsLease(TestDatabase db, String url) throws Exception {
        try (ChildJvm holder = ChildJvm.start(LeaseHolderChild.class, Map.of(), url)) {
            long holderToken = Long.parseLong(holder.awaitLineStartingWith("ACQUIRED ", Duration.ofSeconds(60))
                    .substring(9));
            holder.pause();

            Leases leases = Leases.builder().dataSource(db.dataSource()).build();
            AtomicReference<Lease> rival = new AtomicReference<>();
            await().atMost(Duration.ofSeconds(20))
                    .pollInterval(Duration.ofMillis(50))
                    .until(() -> leases.acquire("vault", "rival", Duration.ofSeconds(30))
                            .map(l -> {
                                rival.set(l);
                                return true;
                            })
                            .orElse(false));
            assertThat(rival.get().token()).isGreaterThan(holderToken);
            try (Connection c = db.dataSource().getConnection()) {
                c.setAutoCommit(false);
                Fence.check(c, "vault", rival.get().token());
                try (Statement s = c.createStatement()) {
                    s.execute("INSERT INTO vault_write (writer) VALUES ('rival')");
                }
                c.commit();
            }
            db.execute("INSERT INTO vault_go VALUES (1)");

            holder.resume();
            String verdict =
                    holder.awaitLine(l -> l.startsWith("ACCEPTED") || l.startsWith("REJECTED"), Duration.ofSeconds(60));
            assertThat(verdict).isEqualTo("REJECTED " + rival.get().token());
        }
        assertThat(db.queryLong("SELECT count(*) FROM vault_write WHERE writer = 'child'"))
                .as("stale writes accepted")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM vault_write WHERE writer = 'rival'"))
                .isEqualTo(1);
    }
}
