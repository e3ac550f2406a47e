package dev.once.core;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.StaleFencingTokenException;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;

/**
 * The lease holder of {@link LeaseSigstopTest}, in a JVM of its own: acquires a 1-second lease,
 * prints {@code ACQUIRED <token>}, waits for the test's go row, then makes its fenced write and
 * prints {@code ACCEPTED} or {@code REJECTED <newest token>}. The test freezes it with SIGSTOP in
 * between. Argument: the JDBC URL of the test's schema.
 */
public final class LeaseHolderChild {

    private LeaseHolderChild() {}

    public static void main(String[] args) throws Exception {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(args[0]);
        config.setMaximumPoolSize(2);
        try (HikariDataSource ds = new HikariDataSource(config)) {
            Leases leases = Leases.builder().dataSource(ds).build();
            Lease lease =
                    leases.acquire("vault", "child", Duration.ofSeconds(1)).orElseThrow();
            System.out.println("ACQUIRED " + lease.token());
            System.out.flush();
            while (!go(ds)) {
                Thread.sleep(10); // the child's own work loop, not a test wait
            }
            try (Connection c = ds.getConnection()) {
                c.setAutoCommit(false);
                try {
                    Fence.check(c, "vault", lease.token());
                    try (PreparedStatement ps =
                            c.prepareStatement("INSERT INTO vault_write (writer) VALUES ('child')")) {
                        ps.executeUpdate();
                    }
                    c.commit();
                    System.out.println("ACCEPTED");
                } catch (StaleFencingTokenException e) {
                    c.rollback();
                    System.out.println("REJECTED " + e.newest());
                }
            }
        }
    }

    private static boolean go(HikariDataSource ds) throws Exception {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT count(*) FROM vault_go")) {
            rs.next();
            return rs.getLong(1) > 0;
        }
    }
}
