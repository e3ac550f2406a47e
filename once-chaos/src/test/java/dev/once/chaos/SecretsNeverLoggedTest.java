package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * S5: a secret placed in payloads, header values, outbox rows and saved idempotency results never
 * appears in a log line, at any level. The work runs in a child JVM ({@link CanaryChild}) whose
 * SLF4J loggers are all at TRACE on stdout, so every line any level could print is captured.
 */
@Tag("chaos")
class SecretsNeverLoggedTest {

    @Test
    void aSecretInPayloadsHeadersAndResultsNeverAppearsInAnyLogLine() throws Exception {
        String secret = "CANARY-" + UUID.randomUUID();
        String probe = "PROBE-" + UUID.randomUUID();
        try (TestDatabase db = Databases.POSTGRES.fresh(2);
                ChildJvm child =
                        ChildJvm.start(CanaryChild.class, Map.of(), Databases.POSTGRES.directUrl(db), secret, probe)) {
            child.awaitLine("DONE"::equals, Duration.ofMinutes(2));
            List<String> lines = child.output();
            List<String> leaks = lines.stream().filter(l -> l.contains(secret)).toList();
            long onceLines = lines.stream().filter(l -> l.contains("dev.once.")).count();
            Chaos.figure("secrets-in-logs")
                    .rounds(lines.size())
                    .put("leaks", leaks.size())
                    .put("once_log_lines", onceLines)
                    .print();
            leaks.forEach(l -> System.out.println("  LEAK " + l));
            assertThat(lines).as("TRACE lines are captured").anyMatch(l -> l.contains(probe));
            assertThat(onceLines)
                    .as("the engine, relay and keys logged something to inspect")
                    .isPositive();
            assertThat(leaks).as("log lines carrying the secret").isEmpty();
        }
    }
}
