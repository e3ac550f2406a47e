package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --base REF} on a real git history made here with the git binary. */
class PullRequestModeTest {

    @TempDir
    Path repo;

    @Test
    void reportsOnlyConsumersChangedSinceTheBaseAndMarksFindingsNewOrExisting() throws Exception {
        git("init", "-q", "-b", "main");
        git("config", "user.email", "scan@example.com");
        git("config", "user.name", "scan test");
        // three services, each a module of its own: notify's auto-commit setting is its own
        copy(Fixtures.of("kafka-cache-refresh"), repo.resolve("catalog"));
        copy(Fixtures.of("spring-kafka-autocommit-yml"), repo.resolve("notify"));
        Files.writeString(repo.resolve("catalog/pom.xml"), "<project/>\n");
        Files.writeString(repo.resolve("notify/pom.xml"), "<project/>\n");
        git("add", "-A");
        git("commit", "-q", "-m", "base");

        // the pull request: a line inside the cache listener's body changes, and a new payment service arrives
        Path cache = repo.resolve("catalog/src/main/java/acme/catalog/PriceCacheListener.java");
        Files.writeString(
                cache,
                Files.readString(cache)
                        .replace(
                                "views.put(p.sku(), seen == null ? 1 : seen + 1);",
                                "String sku = p.sku();\n        views.put(p.sku(), seen == null ? 1 : seen + 1);"));
        copy(Fixtures.of("kafka-payment-reserve"), repo.resolve("payment"));
        Files.writeString(repo.resolve("payment/pom.xml"), "<project/>\n");
        git("add", "-A");
        git("commit", "-q", "-m", "change");

        ScanReport full = ConsumerScan.builder().root(repo).build().run();
        ScanReport pr = ConsumerScan.builder().root(repo).base("HEAD~1").build().run();

        assertThat(full.consumers())
                .extracting(Consumer::name)
                .contains(
                        "WelcomeMailer.onSignup",
                        "PriceCacheListener.onPrice",
                        "PriceCacheListener.onView",
                        "PaymentListener.onOrder");
        assertThat(pr.consumers())
                .as("only changed consumers: %s", pr.consumers())
                .extracting(Consumer::name)
                .containsExactlyInAnyOrder("PriceCacheListener.onView", "PaymentListener.onOrder");
        assertThat(pr.findings())
                .filteredOn(f -> f.location().file().startsWith("payment/"))
                .isNotEmpty()
                .allSatisfy(f -> assertThat(f.status()).isEqualTo("new"));
        assertThat(pr.findings())
                .filteredOn(f -> f.location().file().startsWith("catalog/"))
                .singleElement()
                .satisfies(f -> assertThat(f.status())
                        .as("the cache write was there before")
                        .isEqualTo("existing"));
        assertThat(pr.findings()).noneMatch(f -> f.location().file().startsWith("notify/"));
        assertThat(Format.MARKDOWN.render(pr))
                .contains("changed since `HEAD~1`")
                .contains("_new_")
                .contains("_existing_");
    }

    @Test
    void anUnknownBaseIsReportedWithGitsOwnWords() throws Exception {
        git("init", "-q", "-b", "main");
        copy(Fixtures.of("kafka-cache-refresh"), repo);
        assertThatThrownBy(() -> ConsumerScan.builder()
                        .root(repo)
                        .base("no-such-ref")
                        .build()
                        .run())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("git")
                .hasMessageContaining("no-such-ref");
    }

    private void git(String... args) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(Stream.concat(Stream.of("git", "-C", repo.toString()), Stream.of(args))
                        .toList())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as("git %s: %s", List.of(args), out).isZero();
    }

    static void copy(Path from, Path to) throws IOException {
        try (Stream<Path> walk = Files.walk(from)) {
            for (Path p : walk.toList()) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(p, target, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
    }
}
