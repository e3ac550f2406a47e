package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.OnceException;
import dev.once.Schema;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** MariaDB's migration lock is a GET_LOCK with a wait: a lock not granted stops the migration. */
class SchemaLockMariaDbTest {

    @Test
    void aMigrationLockThatIsNotGrantedStopsTheMigration() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(3);
                Connection holder = db.dataSource().getConnection()) {
            try (Statement s = holder.createStatement();
                    ResultSet rs = s.executeQuery("SELECT GET_LOCK('once-schema:once_', 60)")) {
                rs.next();
                assertThat(rs.getInt(1)).as("the rival instance holds the lock").isEqualTo(1);
            }
            assertThatThrownBy(() -> Schema.migrate(db.dataSource(), "once_", Duration.ofSeconds(1)))
                    .isInstanceOf(OnceException.class)
                    .hasMessageContaining("was not granted within PT1S")
                    .hasMessageContaining("answered 0");
            try (Statement s = holder.createStatement()) {
                s.executeQuery("SELECT RELEASE_LOCK('once-schema:once_')").close();
            }
            // the lock is server-wide: other test JVMs migrating their own databases may hold it a while
            assertThat(Schema.migrate(db.dataSource(), "once_", Duration.ofSeconds(60)))
                    .as("up to date")
                    .isZero();
        }
    }
}
