package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.StaleFencingTokenException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.nio.charset.StandardCharsets;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Idempotency keys on MariaDB, where a transaction reads from the snapshot of its first read. */
class IdempotencyKeysMariaDbTest {

    private static final Duration LOCK = Duration.ofSeconds(30);

    private TestDatabase db;
    private MutableClock clock;
    private IdempotencyKeys keys;

    @BeforeEach
    void setUp() {
        db = TestMariaDb.shared().freshDatabase(6);
        clock = MutableClock.startingNow();
        keys = IdempotencyKeys.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .lockDuration(LOCK)
                .build();
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    // Found by reading (issue 19): the explanation of a refused finish read the key's token from the
    // transaction's old snapshot, saw its own token and answered "already finished": the HTTP layer
    // then answered 500 and released the key instead of 409.
    @Test
    void staleHolderWhoseTransactionReadEarlyGetsStaleFencingTokenNotAlreadyFinished() throws Exception {
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "slow", "fp");
        try (KeyTransaction tx = keys.transaction(first)) {
            try (Statement s = tx.connection().createStatement();
                    ResultSet rs = s.executeQuery("SELECT count(*) FROM once_idempotency_key")) {
                rs.next(); // the effect's reads: the transaction's snapshot is taken here
            }
            clock.advance(LOCK.plusMillis(1)); // the holder stalls past its claim
            BeginResult.Started second = (BeginResult.Started) keys.begin("t", "slow", "fp");
            keys.complete(second, 200, "second".getBytes(StandardCharsets.UTF_8));

            assertThatThrownBy(() -> tx.complete(200, "first".getBytes(StandardCharsets.UTF_8)))
                    .isInstanceOfSatisfying(StaleFencingTokenException.class, e -> {
                        assertThat(e.token()).isEqualTo(first.token());
                        assertThat(e.newest()).isEqualTo(second.token());
                    });
        }
    }
}
