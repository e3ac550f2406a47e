package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Proof that the concurrent-duplicate check can fail: the dedupe most teams write first
 * ("SELECT, then decide, then write") applies an event once per racing delivery. The barrier
 * between check and act makes the race certain instead of likely.
 */
class CheckThenActIsCaughtTest {

    @Test
    void aSelectBeforeInsertDedupeAppliesTheEventOncePerRacingDelivery() throws Exception {
        int threads = 8;
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(threads))) {
            db.execute("CREATE TABLE processed (event_id text NOT NULL)"); // no unique constraint: advisory only
            CyclicBarrier checked = new CyclicBarrier(threads);
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Future<Boolean>> applied = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    applied.add(pool.submit(() -> {
                        try (Connection c = db.dataSource().getConnection()) {
                            boolean seen;
                            try (PreparedStatement ps =
                                    c.prepareStatement("SELECT 1 FROM processed WHERE event_id = ?")) {
                                ps.setString(1, "evt-1");
                                try (ResultSet rs = ps.executeQuery()) {
                                    seen = rs.next();
                                }
                            }
                            checked.await(30, TimeUnit.SECONDS);
                            if (seen) {
                                return false;
                            }
                            try (PreparedStatement ps =
                                    c.prepareStatement("UPDATE account SET balance = balance + 20 WHERE id = 1")) {
                                ps.executeUpdate();
                            }
                            try (PreparedStatement ps = c.prepareStatement("INSERT INTO processed VALUES (?)")) {
                                ps.setString(1, "evt-1");
                                ps.executeUpdate();
                            }
                            return true;
                        }
                    }));
                }
                int count = 0;
                for (Future<Boolean> f : applied) {
                    count += f.get(60, TimeUnit.SECONDS) ? 1 : 0;
                }
                assertThat(count).as("every racing delivery passed the check").isEqualTo(threads);
            } finally {
                pool.shutdownNow();
            }
            assertThat(Ledger.balance(db))
                    .as("check-then-act credits once per delivery")
                    .isEqualTo(20L * threads);
        }
    }
}
