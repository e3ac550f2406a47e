package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.TransactionOutbox;
import dev.once.jdbc.Dialects;
import dev.once.outbox.OutboxMessage;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The outbox on a connection whose transaction the caller owns: it commits and rolls back with the caller. */
class TransactionOutboxTest {

    @Test
    void rowsCommitWithTheCallerAndCarryTheEnrichedHeadersUnderTheCallersOwn() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2);
                Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            TransactionOutbox outbox = TransactionOutbox.builder()
                    .connection(c)
                    .dialect(Dialects.detect(db.dataSource()))
                    .source("orders")
                    .cause("o-1")
                    .headers(() -> Map.of("traceparent", "from-enricher", "x", "enriched"))
                    .build();
            assertThat(outbox.add("emails", null, new byte[0], Map.of("x", "callers"), null))
                    .isEqualTo("orders:o-1#1");
            outbox.flush();
            c.rollback();
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                    .as("rolled back with the caller")
                    .isZero();

            outbox.add("emails", null, new byte[0], Map.of("x", "callers"), null);
            outbox.flush();
            c.commit();
            String headers;
            try (Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT headers FROM once_outbox")) {
                rs.next();
                headers = rs.getString(1);
            }
            c.commit();
            assertThat(headers)
                    .isEqualTo(OutboxMessage.CAUSE_ID_HEADER + "=o-1&" + OutboxMessage.EVENT_ID_HEADER
                            + "=orders%3Ao-1%232&traceparent=from-enricher&x=callers");
        }
    }

    @Test
    void anAutoCommitConnectionAMissingCauseAndABadSourceAreRefusedByName() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2);
                Connection c = db.dataSource().getConnection()) {
            TransactionOutbox.Builder b = TransactionOutbox.builder()
                    .connection(c)
                    .dialect(Dialects.detect(db.dataSource()))
                    .source("orders")
                    .cause("o-1");
            assertThatThrownBy(b::build)
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("auto-commit");
            c.setAutoCommit(false);
            assertThatThrownBy(() -> b.cause(" ").build())
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("cause")
                    .hasMessageContaining("' '");
            assertThatThrownBy(() -> b.cause("o-1").source("a:b").build())
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("source")
                    .hasMessageContaining("a:b");
            c.rollback();
        }
    }
}
