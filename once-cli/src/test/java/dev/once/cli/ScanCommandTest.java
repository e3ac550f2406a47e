package dev.once.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.once.cli.internal.ExitCodes;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code once scan} over fixtures of the once-scan module: formats, --fail-on, --output, bad arguments. */
class ScanCommandTest {

    private static final String PAYMENT = "../once-scan/src/test/resources/fixtures/kafka-payment-reserve";
    private static final String SAFE = "../once-scan/src/test/resources/fixtures/spring-kafka-once";

    @Test
    void textRanksTheConsumerWithThePathAndTheFix() {
        Cli r = Cli.run("scan", PAYMENT);
        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .as(r.toString())
                .contains("#1 PaymentListener.onOrder")
                .contains("blast money")
                .contains("once/duplicate-effect")
                .contains("→ ReservationService.hold")
                .contains("IdempotentConsumer")
                .contains("Production Reliability Index 0/100");
        assertThat(r.err()).matches("(?s)SCAN files=3 lines=\\d+ entry_points=1 findings=3 seconds=[0-9.]+\\s*");
    }

    @Test
    void failOnSetsTheExitStatusByLevel() {
        assertThat(Cli.run("scan", PAYMENT, "--fail-on", "error").exitCode()).isEqualTo(ExitCodes.FINDINGS);
        assertThat(Cli.run("scan", SAFE, "--fail-on", "note").exitCode()).isEqualTo(ExitCodes.OK);
    }

    @Test
    void jsonAndSarifGoToTheOutputFile(@TempDir Path tmp) throws Exception {
        Path json = tmp.resolve("out/report.json");
        Cli r = Cli.run("scan", PAYMENT, "--format", "json", "--output", json.toString());
        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out()).isEmpty();
        JsonNode report = new ObjectMapper().readTree(json.toFile());
        assertThat(report.path("index").asInt()).isZero();
        assertThat(report.at("/consumers/0/blast").asText()).isEqualTo("money");
        assertThat(report.at("/findings/0/fix").asText()).contains("IdempotentConsumer");

        Path sarif = tmp.resolve("report.sarif");
        assertThat(Cli.run("scan", PAYMENT, "--format", "sarif", "--output", sarif.toString())
                        .exitCode())
                .isZero();
        assertThat(new ObjectMapper().readTree(sarif.toFile()).path("version").asText())
                .isEqualTo("2.1.0");

        Cli md = Cli.run("scan", PAYMENT, "--format", "markdown");
        assertThat(md.out())
                .startsWith("### once scan: Production Reliability Index 0/100")
                .contains("| 1 | `PaymentListener.onOrder`");
        assertThat(Files.exists(tmp.resolve("out"))).isTrue();
    }

    @Test
    void badArgumentsAreUsageErrorsThatNameTheValue() {
        Cli format = Cli.run("scan", PAYMENT, "--format", "xml");
        assertThat(format.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(format.err()).contains("'xml'").contains("text, json, markdown, sarif");
        Cli level = Cli.run("scan", PAYMENT, "--fail-on", "fatal");
        assertThat(level.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(level.err()).contains("'fatal'");
        Cli missing = Cli.run("scan", "no/such/dir");
        assertThat(missing.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(missing.err()).contains("no/such/dir");
        assertThat(Cli.run("scan", "--help").out())
                .contains("Usage: once scan")
                .contains("--base")
                .contains("--fail-on");
    }
}
