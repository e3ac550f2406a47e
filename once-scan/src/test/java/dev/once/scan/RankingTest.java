package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Blast radius and the Production Reliability Index: money ranks above a cache, and the index is the documented formula. */
class RankingTest {

    @Test
    void aConsumerThatMovesMoneyRanksAboveOneThatRefreshesACache(@TempDir Path repo) throws Exception {
        for (String f : new String[] {"kafka-cache-refresh", "kafka-payment-reserve", "spring-kafka-once"}) {
            PullRequestModeTest.copy(Fixtures.of(f), repo.resolve(f));
            Files.writeString(repo.resolve(f + "/pom.xml"), "<project/>\n");
        }
        ScanReport r = ConsumerScan.builder().root(repo).build().run();

        assertThat(r.consumers())
                .extracting(Consumer::name)
                .containsExactly(
                        "PaymentListener.onOrder",
                        "PriceCacheListener.onView",
                        "PriceCacheListener.onPrice",
                        "BillingListener.onPayment");
        Consumer money = r.consumers().get(0);
        Consumer cache = r.consumers().get(1);
        Consumer overwrite = r.consumers().get(2);
        Consumer safe = r.consumers().get(3);
        assertThat(money.blast()).isEqualTo(Blast.MONEY);
        assertThat(money.score()).isZero();
        assertThat(cache.blast()).isEqualTo(Blast.CACHE);
        assertThat(cache.score()).as("one cache note: 100 - 10 x 0.1 x 1").isEqualTo(99);
        assertThat(overwrite.score())
                .as("a price stored under its sku replaces itself")
                .isEqualTo(100);
        assertThat(safe.score()).isEqualTo(100);
        // PRI = round(sum(B_c * S_c) / sum(B_c)) = round((10*0 + 1*99 + 1*100 + 1*100) / 13)
        assertThat(r.index()).isEqualTo(Math.round((10 * 0 + 99 + 100 + 100) / 13f));
        assertThat(r.findings().get(0).consumer()).isEqualTo(money.id());
    }
}
