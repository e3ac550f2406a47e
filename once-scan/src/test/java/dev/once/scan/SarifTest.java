package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SARIF output against the official OASIS SARIF 2.1.0 schema (read from {@code ../shared/data/}
 * beside the clone, never copied) and, where it installs, Microsoft's SARIF multitool
 * {@code validate}.
 */
class SarifTest {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static ScanReport report;
    private static JsonNode sarif;

    @BeforeAll
    static void scanTheWholeCorpus() throws IOException {
        report = ConsumerScan.builder().root(Fixtures.ROOT).build().run();
        sarif = JSON.readTree(Format.SARIF.render(report));
    }

    /** {@code shared/data/sarif-schema-2.1.0.json} beside the clone: the first one found walking up from here. */
    static Optional<Path> officialSchema() {
        String explicit = System.getenv("ONCE_SARIF_SCHEMA");
        if (explicit != null) {
            return Optional.of(Path.of(explicit));
        }
        for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
            Path p = d.resolve("shared/data/sarif-schema-2.1.0.json");
            if (Files.isRegularFile(p)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    @Test
    void sarifValidatesAgainstTheOfficialSchema() throws IOException {
        Optional<Path> schemaFile = officialSchema();
        Assumptions.assumeTrue(
                schemaFile.isPresent(),
                "skipped: ../shared/data/sarif-schema-2.1.0.json is not beside this clone (it is in CI and on developers' machines)");
        JsonSchema schema;
        try (InputStream in = Files.newInputStream(schemaFile.get())) {
            schema = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V4).getSchema(in);
        }
        Set<ValidationMessage> errors = schema.validate(sarif);
        System.out.println("SARIF schema " + schemaFile.get() + ": " + errors.size() + " errors over "
                + sarif.at("/runs/0/results").size() + " results");
        assertThat(errors).as("SARIF 2.1.0 schema violations").isEmpty();
        assertThat(sarif.at("/runs/0/results").size())
                .as("the corpus has findings to validate")
                .isGreaterThan(10);
    }

    @Test
    void sarifHasWhatGitHubCodeScanningReads() {
        JsonNode rules = sarif.at("/runs/0/tool/driver/rules");
        assertThat(rules.size()).isEqualTo(Rule.values().length);
        for (JsonNode r : rules) {
            assertThat(r.path("id").asText()).startsWith("once/");
            assertThat(r.at("/shortDescription/text").asText()).isNotBlank();
            assertThat(r.at("/fullDescription/text").asText()).isNotBlank();
            assertThat(r.at("/help/text").asText()).isNotBlank();
            assertThat(r.at("/help/markdown").asText()).contains("`");
            assertThat(r.at("/properties/precision").asText()).isIn("very-high", "high", "medium", "low");
            assertThat(r.at("/properties/security-severity").isMissingNode())
                    .as("not a security tool")
                    .isTrue();
        }
        for (JsonNode res : sarif.at("/runs/0/results")) {
            assertThat(res.at("/partialFingerprints/primaryLocationLineHash").asText())
                    .matches("[0-9a-f]{16}:1");
            assertThat(res.at("/locations/0/physicalLocation/artifactLocation/uri")
                            .asText())
                    .doesNotStartWith("/");
            assertThat(res.at("/locations/0/physicalLocation/region/startLine").asInt())
                    .isPositive();
            assertThat(res.at("/relatedLocations").size())
                    .as("entry point and ack or effect: %s", res)
                    .isGreaterThanOrEqualTo(1);
            assertThat(res.at("/properties/security-severity").isMissingNode()).isTrue();
        }
        JsonNode duplicate = null;
        for (JsonNode res : sarif.at("/runs/0/results")) {
            if (res.path("ruleId").asText().equals("once/duplicate-effect")) {
                duplicate = res;
                break;
            }
        }
        assertThat(duplicate).isNotNull();
        List<String> roles = new ArrayList<>();
        duplicate
                .at("/relatedLocations")
                .forEach(r -> roles.add(r.at("/message/text").asText()));
        assertThat(roles).contains("ack", "effect");
    }

    @Test
    void sarifPassesTheMultitoolWhereItInstalls(@TempDir Path tmp) throws Exception {
        Optional<Path> tool = Multitool.find();
        Assumptions.assumeTrue(
                tool.isPresent(), "skipped: @microsoft/sarif-multitool did not install here (npm missing or offline)");
        Path file = tmp.resolve("once-scan.sarif");
        Files.writeString(file, Format.SARIF.render(report), StandardCharsets.UTF_8);
        Path out = tmp.resolve("validation.sarif");
        Process p = new ProcessBuilder(tool.get().toString(), "validate", file.toString(), "-o", out.toString())
                .redirectErrorStream(true)
                .start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(180, TimeUnit.SECONDS)).as("multitool finished").isTrue();
        System.out.println("SARIF multitool " + tool.get() + ":\n" + log);
        assertThat(p.exitValue()).as(log).isZero();
        List<String> errors = new ArrayList<>();
        for (JsonNode r : JSON.readTree(out.toFile()).at("/runs/0/results")) {
            if (r.path("level").asText("warning").equals("error")) {
                errors.add(r.toString());
            }
        }
        assertThat(errors).as("multitool validation errors").isEmpty();
        assertThat(log).doesNotContain(": error ");
    }
}
