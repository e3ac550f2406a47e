package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A synthetic repository of 1,000 Java files: listeners that call services that call
 * repositories and clients, a tenth of them unsafe. Prints the SCAN line; the figure is reported,
 * not asserted (the machine is shared).
 */
class SpeedTest {

    @TempDir
    Path repo;

    /**
     * A Camel route of many steps is one fluent chain: the type of each link was once asked twice per link (the
     * repository's declared return and the library return-type catalogue each asked for the receiver's), so a
     * 27-link route took 2^27 look-ups and never finished. Each link's receiver is asked once now.
     */
    @Test
    void aLongFluentChainScansInLinearTime() throws IOException {
        Path src = Files.createDirectories(repo.resolve("src/main/java/routes"));
        StringBuilder steps = new StringBuilder();
        for (int i = 0; i < 60; i++) {
            steps.append("\n            .setHeader(\"h")
                    .append(i)
                    .append("\", constant(\"v")
                    .append(i)
                    .append("\"))");
        }
        Files.writeString(src.resolve("LongRoute.java"), """
                package routes;

                import org.apache.camel.builder.RouteBuilder;

                public class LongRoute extends RouteBuilder {
                    @Override
                    public void configure() {
                        from("kafka:orders")%s
                            .to("jdbc:ds");
                    }
                }
                """.formatted(steps));
        ScanReport report = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                java.time.Duration.ofSeconds(60),
                () -> ConsumerScan.builder().root(repo).build().run());
        assertThat(report.consumers()).hasSize(1);
    }

    /**
     * A listener of thousands of calls on a field of its class ({@code store.put(…)}): each call asked, in turn, who
     * constructs the class with that field (a walk of the whole file when the class is injected, never made there),
     * which methods of the class are handed to a scheduler (a walk of the class), whether the method declares a local
     * of that name (a walk of the method) and, for each name, the declarations of every earlier statement (a walk of
     * each). Quadratic in the method's length: 3,000 calls took 38 s of CPU. Each is read once per class, method or
     * statement now (2 s).
     */
    @Test
    void aListenerOfThousandsOfCallsOnAFieldScansInLinearTime() throws IOException {
        Path src = Files.createDirectories(repo.resolve("src/main/java/synth"));
        StringBuilder calls = new StringBuilder();
        for (int i = 0; i < 3_000; i++) {
            calls.append("\n        store.put(\"k").append(i).append("\", e);");
        }
        Files.writeString(src.resolve("BigListener.java"), """
                package synth;

                import org.springframework.kafka.annotation.KafkaListener;
                import org.springframework.stereotype.Component;

                @Component
                public class BigListener {
                    private final java.util.Map<String, String> store;

                    public BigListener(java.util.Map<String, String> store) {
                        this.store = store;
                    }

                    @KafkaListener(topics = "big")
                    public void on(String e) {%s
                    }
                }
                """.formatted(calls));
        ScanReport report = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                java.time.Duration.ofSeconds(60),
                () -> ConsumerScan.builder().root(repo).build().run());
        assertThat(report.consumers()).hasSize(1);
    }

    @Test
    void aThousandFileRepositoryScansInSeconds() throws IOException {
        Path src = Files.createDirectories(repo.resolve("src/main/java/synth"));
        int listeners = 250;
        for (int i = 0; i < listeners; i++) {
            boolean unsafe = i % 10 == 0;
            Files.writeString(src.resolve("Listener" + i + ".java"), """
                    package synth;

                    import org.springframework.kafka.annotation.KafkaListener;
                    import org.springframework.stereotype.Component;

                    @Component
                    public class Listener%1$d {
                        private final Service%1$d service;

                        public Listener%1$d(Service%1$d service) {
                            this.service = service;
                        }

                        @KafkaListener(topics = "topic-%1$d")
                        public void on(Event%1$d e) {
                            service.apply(e);
                        }
                    }
                    """.formatted(i));
            Files.writeString(
                    src.resolve("Service" + i + ".java"),
                    """
                    package synth;

                    import org.springframework.jdbc.core.JdbcTemplate;
                    import org.springframework.transaction.annotation.Transactional;

                    public class Service%1$d {
                        private final JdbcTemplate jdbc;
                        private final Client%1$d client;

                        public Service%1$d(JdbcTemplate jdbc, Client%1$d client) {
                            this.jdbc = jdbc;
                            this.client = client;
                        }

                        @Transactional
                        public void apply(Event%1$d e) {
                            %2$s
                            jdbc.update("UPDATE totals SET n = n + ? WHERE id = ?", e.amount(), e.id());
                            client.notifyPartner(e);
                        }
                    }
                    """.formatted(
                                    i,
                                    unsafe
                                            ? ""
                                            : "if (jdbc.update(\"INSERT INTO processed_events (event_id) VALUES (?) ON CONFLICT DO NOTHING\", e.id()) == 0) { return; }"));
            Files.writeString(src.resolve("Client" + i + ".java"), """
                    package synth;

                    public class Client%1$d {
                        void notifyPartner(Event%1$d e) {
                            String s = e.toString();
                            if (s.isEmpty()) {
                                throw new IllegalArgumentException("empty event");
                            }
                        }
                    }
                    """.formatted(i));
            Files.writeString(src.resolve("Event" + i + ".java"), """
                    package synth;

                    public record Event%1$d(String id, long amount) {
                    }
                    """.formatted(i));
        }
        ScanReport report = ConsumerScan.builder().root(repo).build().run();
        System.out.println(report.summaryLine());
        assertThat(report.files()).isEqualTo(1000);
        assertThat(report.consumers()).hasSize(listeners);
        assertThat(report.findings())
                .filteredOn(f -> f.rule() == Rule.DUPLICATE_EFFECT)
                .hasSize(listeners / 10);
    }
}
