package dev.once.cli.demo;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The demo page end to end in a real headless Chromium: click each button as a person would,
 * wait for the lanes to settle, and read the counters off the page. The once lane must hold
 * every payment exactly once and charge each card once; the naive lane must have over-counted by
 * at least one payment per duplicate-causing button. Leaves a screenshot in
 * {@code target/demo-page.png}.
 */
class DemoBrowserTest {

    private static final Duration SETTLE = Duration.ofSeconds(60);
    private static Demo demo;
    private static DemoServer server;
    private static Chromium chromium;

    // In @BeforeEach, not @BeforeAll: a missing browser then shows as a skipped test, not as nothing.
    @BeforeEach
    void start() throws Exception {
        chromium = Chromium.launch(); // first: skips before anything else starts when there is no browser
        demo = Demo.start(
                new Demo.Options(
                        TestPostgres.shared().jdbcUrl(),
                        TestKafka.shared().bootstrapServers(),
                        DemoSchemas.name("browser")),
                line -> {});
        server = DemoServer.start(demo, 0);
    }

    @AfterEach
    void stop() throws Exception {
        if (chromium != null) {
            chromium.close();
        }
        if (server != null) {
            server.close();
        }
        if (demo != null) {
            demo.close();
            DemoSchemas.drop(DemoSchemas.name("browser"));
        }
    }

    @Test
    void eachButtonCausesItsDuplicateAndOnlyTheNaiveLaneCountsIt() throws Exception {
        chromium.open("http://127.0.0.1:" + server.port() + "/");
        awaitPage("the first state arrives by server-sent events", "charged", 0);
        assertThat(text("story-now")).contains("Deliver a few payments");

        String[] buttons = {"deliver", "double-publish", "crash", "rebalance", "concurrent"};
        String[] explained = {
            "published once",
            "published twice with the same event id",
            "before committing its Kafka offset",
            "longer than max.poll.interval.ms",
            "at the same moment"
        };
        for (int i = 0; i < buttons.length; i++) {
            int payments = i + 1;
            int duplicates = i; // every button after "deliver" duplicates its payment
            chromium.eval("document.getElementById('btn-" + buttons[i] + "').click()");
            awaitPage("after " + buttons[i], "charged", 20L * payments);

            String story = text("story-now");
            assertThat(story)
                    .as("the line explaining " + buttons[i])
                    .contains(explained[i])
                    .contains("pay-" + payments);
            assertThat(value("once-ledger"))
                    .as("once ledger after " + buttons[i])
                    .isEqualTo(20L * payments);
            assertThat(value("once-overcount"))
                    .as("once overcount after " + buttons[i])
                    .isZero();
            assertThat(value("once-deduped"))
                    .as("once deduped after " + buttons[i])
                    .isGreaterThanOrEqualTo(20L * duplicates);
            assertThat(value("once-charges"))
                    .as("cards charged for the once lane after " + buttons[i])
                    .isEqualTo(payments);
            assertThat(value("naive-overcount"))
                    .as("naive overcount after " + buttons[i])
                    .isGreaterThanOrEqualTo(20L * duplicates);
            assertThat(value("naive-ledger"))
                    .as("naive ledger after " + buttons[i])
                    .isEqualTo(20L * payments + value("naive-overcount"));
            assertThat(value("naive-charges"))
                    .as("cards charged for the naive lane after " + buttons[i])
                    .isGreaterThanOrEqualTo(payments + duplicates);
            assertThat(value("duplicated"))
                    .as("duplicated deliveries after " + buttons[i])
                    .isGreaterThanOrEqualTo(duplicates);
        }
        JsonNode discarded = chromium.eval(
                "[...document.querySelectorAll('#once-discarded li:not(.none)')].map(li => li.textContent)");
        assertThat(discarded.toString())
                .as("the once lane lists its discarded duplicates")
                .contains("pay-2 · double publish")
                .contains("pay-3 · redelivered after a crash in the ack gap")
                .contains("pay-4 · redelivered after a rebalance")
                .contains("pay-5 · concurrent delivery");
        assertThat(text("once-meta")).contains("re-sent charge replayed by the provider");

        Path png = Path.of("target", "demo-page.png");
        chromium.screenshot(png);
        byte[] bytes = Files.readAllBytes(png);
        assertThat(bytes.length).isGreaterThan(10_000);
        assertThat(new String(bytes, 1, 3, java.nio.charset.StandardCharsets.US_ASCII))
                .isEqualTo("PNG");
    }

    /** Waits until the page shows {@code id} at {@code expected} and says the lanes have settled. */
    private static void awaitPage(String what, String id, long expected) throws Exception {
        long deadline = System.nanoTime() + SETTLE.toNanos();
        String seen = "";
        while (System.nanoTime() < deadline) {
            JsonNode s = chromium.eval("({v: document.getElementById('" + id + "').dataset.value,"
                    + " settled: document.getElementById('settled').dataset.value})");
            seen = s.toString();
            if (String.valueOf(expected).equals(s.path("v").asText())
                    && "true".equals(s.path("settled").asText())) {
                return;
            }
            Thread.sleep(100); // polling the page for the condition
        }
        throw new AssertionError(what + ": the page did not show #" + id + " = " + expected + " settled within "
                + SETTLE.toSeconds() + " s; last seen " + seen + "; state " + Map.of("demo", demo.state()));
    }

    private static long value(String id) throws Exception {
        return Long.parseLong(chromium.eval("document.getElementById('" + id + "').dataset.value")
                .asText());
    }

    private static String text(String id) throws Exception {
        return chromium.eval("document.getElementById('" + id + "').textContent")
                .asText();
    }
}
