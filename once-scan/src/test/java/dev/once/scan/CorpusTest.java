package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Precision and recall of the scan over the fixture corpus: every fixture's findings against its
 * {@code expected-findings.txt}, positives and negatives alike.
 */
class CorpusTest {

    @Test
    void precisionAndRecallOverTheFixtureCorpus() {
        int truePositives = 0;
        int reported = 0;
        int expectedTotal = 0;
        List<String> misses = new ArrayList<>();
        List<String> extras = new ArrayList<>();
        List<Path> fixtures = Fixtures.all();
        for (Path fixture : fixtures) {
            List<Fixtures.Expected> expected = Fixtures.expected(fixture);
            ScanReport report = Fixtures.scan(fixture);
            expectedTotal += expected.size();
            reported += report.findings().size();
            List<Fixtures.Expected> unmatched = new ArrayList<>(expected);
            for (Finding f : report.findings()) {
                Fixtures.Expected hit =
                        unmatched.stream().filter(x -> x.matches(f)).findFirst().orElse(null);
                if (hit != null) {
                    unmatched.remove(hit);
                    truePositives++;
                } else {
                    extras.add(fixture.getFileName() + ": " + f.rule().id() + " " + f.location() + " " + f.message());
                }
            }
            unmatched.forEach(x -> misses.add(fixture.getFileName() + ": " + x));
        }
        double precision = reported == 0 ? 1 : (double) truePositives / reported;
        double recall = expectedTotal == 0 ? 1 : (double) truePositives / expectedTotal;
        System.out.printf(
                Locale.ROOT,
                "CORPUS fixtures=%d expected=%d reported=%d true_positives=%d precision=%.3f recall=%.3f%n",
                fixtures.size(),
                expectedTotal,
                reported,
                truePositives,
                precision,
                recall);
        misses.forEach(m -> System.out.println("MISSED " + m));
        extras.forEach(m -> System.out.println("EXTRA  " + m));
        assertThat(fixtures).as("the corpus has a fixture per pattern").hasSizeGreaterThanOrEqualTo(5);
        // the sidecars are the specification: every expected finding, and nothing else
        assertThat(extras)
                .as("findings no sidecar expects (precision %.3f)", precision)
                .isEmpty();
        assertThat(misses)
                .as("expected findings not reported (recall %.3f)", recall)
                .isEmpty();
    }
}
