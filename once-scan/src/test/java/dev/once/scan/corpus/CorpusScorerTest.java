package dev.once.scan.corpus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.scan.ConsumerScan;
import dev.once.scan.Location;
import dev.once.scan.ScanReport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real-corpus scorer on a tiny labelled fixture (the real corpus needs the mirrors, which CI
 * does not have): what counts as found, missed and sprung, and the SCAN-SCORE line.
 */
class CorpusScorerTest {

    private static final Path LABELS = Path.of("src/test/resources/corpus-labels/kafka-manual-ack-first.txt");
    private static final Path FIXTURE = Path.of("src/test/resources/fixtures/kafka-manual-ack-first");
    /** A line of InvoiceListener.java within the slack of its finding (line 17) that the finding's path does not name. */
    private static final int MUST_OFF_PATH = 14;

    @Test
    void scoresEntriesMustsAndTrapsByFileAndNearbyLine() {
        Labels labels = Labels.read(LABELS);
        Labels.Score s =
                labels.score(ConsumerScan.builder().root(FIXTURE).build().run());

        assertThat(s.count(Labels.Kind.MUST)).isEqualTo(2);
        assertThat(s.missed()).extracting(Labels.Label::rule).containsExactly("once/check-then-act");
        // the one finding (line 17) lies within the slack of the trap at 15 too, but the must at 17 is nearer: it is
        // the must's, and springs no trap
        assertThat(s.sprung()).isEmpty();
        assertThat(s.entriesMissed())
                .extracting(Labels.Label::file)
                .containsExactly("src/main/java/acme/invoices/Elsewhere.java");

        List<String> lines = CorpusScore.summary(List.of(s));
        assertThat(lines).hasSize(1);
        assertThat(lines.get(0))
                .startsWith("SCAN-SCORE half=A repos=1 recall=0.500 (1/2) trap_false_alarms=0.000 (0/2)"
                        + " entry_points=0.500 (1/2) median_s=");
    }

    @Test
    void missesAreCountedByKindWithoutNamingThem() {
        Labels.Score s = Labels.read(LABELS)
                .score(ConsumerScan.builder().root(FIXTURE).build().run());

        assertThat(CorpusScore.missedByKind(List.of(s)))
                .containsExactly("MISSED-BY-KIND half=A entries kafka=1 musts once/check-then-act=1");
    }

    @Test
    void oneFindingNearAMustAndATrapIsTheNearerLabelsNeverBoth(@TempDir Path dir) throws Exception {
        ScanReport report = ConsumerScan.builder().root(FIXTURE).build().run();
        String head = "repo: https://github.com/example/kafka-manual-ack-first\ncommit: 0\nhalf: A\n";
        String file = "src/main/java/acme/invoices/InvoiceListener.java";
        // the finding is at line 17: a trap on it and a must three lines off (not on its path) -> the trap's
        Path trapNearer = dir.resolve("trap-nearer.txt");
        Files.writeString(
                trapNearer,
                head
                        + "must once/ack-before-effect " + file + ":" + MUST_OFF_PATH + " three lines off\n"
                        + "trap once/ack-before-effect " + file + ":17 on the finding's line\n");
        Labels.Score t = Labels.read(trapNearer).score(report);
        assertThat(t.sprung()).hasSize(1);
        assertThat(t.missed()).hasSize(1);
        // the same two lines, equally near (a tie): the must's
        Path tie = dir.resolve("tie.txt");
        Files.writeString(
                tie,
                head
                        + "must once/ack-before-effect " + file + ":15 two lines above\n"
                        + "trap once/ack-before-effect " + file + ":19 two lines below\n");
        Labels.Score u = Labels.read(tie).score(report);
        assertThat(u.sprung()).isEmpty();
        assertThat(u.missed()).isEmpty();
    }

    @Test
    void anEntryLabelMatchesAnywhereOnTheHandlersSpanWithinTheSlack() {
        Labels.Label atName = new Labels.Label(Labels.Kind.ENTRY, "kafka", "A.java", 20, "at the method's name");
        Labels.Label atAnnotation = new Labels.Label(Labels.Kind.ENTRY, "kafka", "A.java", 12, "at @KafkaListener");
        Labels.Label below = new Labels.Label(Labels.Kind.ENTRY, "kafka", "A.java", 24, "past the slack");
        Location span = new Location("A.java", 12, 5, "@KafkaListener(", 20);

        assertThat(atName.near(span)).isTrue();
        assertThat(atAnnotation.near(span)).isTrue();
        assertThat(below.near(span)).isFalse();
        assertThat(atName.near(new Location("A.java", 12, 5, "@KafkaListener(")))
                .isFalse();
    }

    @Test
    void aLabelLineOfAnUnknownKindIsRejectedWithItsPlace(@TempDir Path dir) throws Exception {
        Path bad = dir.resolve("bad.txt");
        Files.writeString(bad, "repo: https://github.com/x/y\ncommit: 0\nhalf: B\nfound once/x A.java:3 why\n");
        assertThatThrownBy(() -> Labels.read(bad))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("bad.txt:4")
                .hasMessageContaining("entry, must or trap, not 'found'");
    }

    @Test
    void aRepositoryWithoutACheckoutAtItsPinnedCommitIsListedAndLeftOutOfTheFigures(@TempDir Path dir)
            throws Exception {
        Labels labels = Labels.read(LABELS);
        Labels.Score s =
                labels.score(ConsumerScan.builder().root(FIXTURE).build().run());
        Path checkouts = dir.resolve("corpus");
        Files.createDirectories(checkouts.resolve(labels.name()));
        // a checkout of another commit (or none at all) is not the labelled code: never scored
        Files.writeString(checkouts.resolve(labels.name()).resolve(".commit"), "0000000\n");

        List<String> missing = CorpusScore.notScored(List.of(labels), checkouts);

        assertThat(missing)
                .containsExactly("NOT-SCORED half=A " + labels.name() + " commit " + labels.commit()
                        + ": no checkout at the pinned commit (not in the mirror's snapshot?)");
        assertThat(CorpusScore.summary(List.of(s), List.of(labels)).get(0))
                .startsWith("SCAN-SCORE half=A repos=1 recall=0.500 (1/2)")
                .endsWith(" not_scored=1");
        assertThat(CorpusScore.summary(List.of(s)).get(0)).doesNotContain("not_scored");

        Files.writeString(checkouts.resolve(labels.name()).resolve(".commit"), labels.commit() + "\n");
        assertThat(CorpusScore.notScored(List.of(labels), checkouts)).isEmpty();
    }
}
