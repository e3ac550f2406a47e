package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Inbox;
import dev.once.InvalidConfigurationException;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import org.junit.jupiter.api.Test;

/**
 * {@link Inbox#claim} validates the consumer name once per name rather than by regex on every claim
 * (issue 21, the per-message path): a bad name after a good one must still be refused before any SQL runs.
 */
class InboxConsumerNameTest {

    @Test
    void aBadConsumerNameAfterAGoodOneIsStillRefused() throws Exception {
        Inbox inbox = Inbox.of(Dialects.POSTGRESQL);
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(2));
                Connection c = db.dataSource().getConnection()) {
            assertThat(inbox.claim(c, "billing", "e-1")).isTrue();
            assertThatThrownBy(() -> inbox.claim(c, "billing; drop table", "e-2"))
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageContaining("'billing; drop table'");
            assertThatThrownBy(() -> inbox.claim(c, null, "e-3")).isInstanceOf(InvalidConfigurationException.class);
            assertThatThrownBy(() -> inbox.claimAll(c, "Billing", java.util.List.of("e-5")))
                    .isInstanceOf(InvalidConfigurationException.class);
            assertThat(inbox.claim(c, "billing", "e-4")).isTrue();
        }
    }
}
