package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.Services;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * R11: the protocol itself, model-checked. Each Promela model in {@code src/test/spin} (with a
 * text beside it mapping its steps to the Java classes) is compiled with {@code spin -a}, built
 * with gcc and run exhaustively: the once models must give {@code errors: 0}; the broken ones
 * (naive, check-then-act, ack before commit, writes without or outside the fence, an outbox buffer
 * blind to savepoints, an outcome taken from the outer commit, state left bound across REQUIRES_NEW) must give a
 * counterexample, whose trail is printed. Skipped when SPIN is not installed, unless
 * {@value Services#REQUIRE_ENV} lists {@code spin}.
 */
@Tag("chaos")
class SpinModelTest {

    private static final Path MODELS = Path.of("src/test/spin");
    private static final Path WORK = Path.of("target/spin");
    private static final Pattern ERRORS = Pattern.compile("errors: (\\d+)");
    private static final Pattern STATES = Pattern.compile("(\\d+) states, stored");
    private static final Pattern VIOLATION = Pattern.compile("assertion violated (.*) \\(at depth (\\d+)\\)");

    /** Every model and define the tests check: searched up front, two at a time (each in its own directory). */
    private static final List<List<String>> VARIANTS = List.of(
            List.of("claim.pml", ""),
            List.of("naive.pml", "NAIVE"),
            List.of("naive.pml", "CHECK_THEN_ACT"),
            List.of("claim.pml", "ACK_BEFORE_COMMIT"),
            List.of("lease.pml", ""),
            List.of("lease.pml", "UNFENCED"),
            List.of("lease.pml", "FENCE_OUTSIDE_TX"),
            List.of("joined.pml", ""),
            List.of("joined.pml", "BUFFER_NO_SAVEPOINTS"),
            List.of("joined.pml", "OUTCOME_FROM_OUTER_COMMIT"),
            List.of("joined.pml", "SHARED_ON_SUSPEND"));

    private static final Map<String, Future<Search>> SEARCHES = new ConcurrentHashMap<>();
    private static ExecutorService searching;

    @BeforeAll
    static void spinIsInstalled() {
        try {
            run(Path.of("."), "spin", "-V");
            run(Path.of("."), "gcc", "--version");
        } catch (IOException | InterruptedException e) {
            throw Services.unavailable("spin", "apt-get install -y spin gcc (Debian package spin 6.5)", e);
        }
        // The gcc compile of each pan.c dominates the class's time: two at once on the CI's two cores.
        searching = Executors.newFixedThreadPool(2);
        for (List<String> v : VARIANTS) {
            String define = v.get(1).isEmpty() ? null : v.get(1);
            SEARCHES.put(variant(v.get(0), define), searching.submit(() -> search(v.get(0), define)));
        }
    }

    @AfterAll
    static void stopSearching() {
        if (searching != null) {
            searching.shutdownNow();
        }
    }

    @Test
    void claimEffectCommitAckAppliesEveryAcknowledgedEventExactlyOnce() throws Exception {
        Result r = check("claim.pml", null);
        assertThat(r.errors)
                .as("SPIN on the once protocol, with crashes at every step:\n" + r.output)
                .isZero();
    }

    @Test
    void theNaiveConsumerHasACounterexample() throws Exception {
        Result r = check("naive.pml", "NAIVE");
        assertThat(r.errors)
                .as("SPIN must find the redelivery after the ack gap:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void theCheckThenActConsumerHasACounterexample() throws Exception {
        Result r = check("naive.pml", "CHECK_THEN_ACT");
        assertThat(r.errors)
                .as("SPIN must find the two concurrent checks:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void anAckBeforeTheCommitHasACounterexample() throws Exception {
        Result r = check("claim.pml", "ACK_BEFORE_COMMIT");
        assertThat(r.errors)
                .as("SPIN must find the acknowledged, crashed, lost event:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void aFencedWriteOfAPausedLeaseHolderIsRejected() throws Exception {
        Result r = check("lease.pml", null);
        assertThat(r.errors).as("SPIN on lease + fencing token:\n" + r.output).isZero();
    }

    @Test
    void anUnfencedLeaseHolderHasACounterexample() throws Exception {
        Result r = check("lease.pml", "UNFENCED");
        assertThat(r.errors)
                .as("SPIN must find the paused holder writing after its successor:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void aFenceCheckedOutsideTheWritesTransactionHasACounterexample() throws Exception {
        Result r = check("lease.pml", "FENCE_OUTSIDE_TX");
        assertThat(r.errors)
                .as("SPIN must find the write that lands after the fence was released:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void onceInsideTheCallersTransactionFollowsSavepointsSuspensionAndJoinedOutcomes() throws Exception {
        Result r = check("joined.pml", null);
        assertThat(r.errors)
                .as("SPIN on savepoints, REQUIRES_NEW and joined outcomes:\n" + r.output)
                .isZero();
    }

    @Test
    void anOutboxBufferThatIgnoresSavepointsHasACounterexample() throws Exception {
        Result r = check("joined.pml", "BUFFER_NO_SAVEPOINTS");
        assertThat(r.errors)
                .as("SPIN must find the row added under a rolled-back savepoint and sent:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void anOutcomeTakenFromTheOuterCommitHasACounterexample() throws Exception {
        Result r = check("joined.pml", "OUTCOME_FROM_OUTER_COMMIT");
        assertThat(r.errors)
                .as("SPIN must find the APPLIED reported for work a rollback to a savepoint undid:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    @Test
    void stateLeftBoundWhileARequiresNewTransactionRunsHasACounterexample() throws Exception {
        Result r = check("joined.pml", "SHARED_ON_SUSPEND");
        assertThat(r.errors)
                .as("SPIN must find the inner transaction's message written into the suspended one:\n" + r.output)
                .isPositive();
        assertThat(r.trail).contains("assertion violated");
    }

    private record Result(int errors, long states, String output, String trail) {}

    private record Search(String output, String trail) {}

    private static String variant(String model, String define) {
        return model.replace(".pml", "") + (define == null ? "" : "-" + define.toLowerCase());
    }

    /** spin -a, gcc, an exhaustive pan search and, on an error, the trail: no assertions, safe off the test thread. */
    private static Search search(String model, String define) throws Exception {
        String variant = variant(model, define);
        Path dir = WORK.resolve(variant);
        Files.createDirectories(dir);
        Files.copy(MODELS.resolve(model), dir.resolve(model), StandardCopyOption.REPLACE_EXISTING);
        Files.deleteIfExists(dir.resolve(model + ".trail"));
        List<String> spin = new ArrayList<>(List.of("spin"));
        if (define != null) {
            spin.add("-D" + define);
        }
        run(dir, concat(spin, "-a", model));
        // -O0: the searches take milliseconds, an optimising compile of pan.c takes seconds.
        run(dir, "gcc", "-w", "-O0", "-DSAFETY", "-o", "pan", "pan.c");
        String output = run(dir, "./pan", "-m100000", "-w20");
        Matcher errors = ERRORS.matcher(output);
        boolean counterexample = errors.find() && Integer.parseInt(errors.group(1)) > 0;
        return new Search(output, counterexample ? run(dir, concat(spin, "-t", "-p", model)) : "");
    }

    private static Result check(String model, String define) throws Exception {
        String variant = variant(model, define);
        Future<Search> searched = SEARCHES.get(variant);
        assertThat(searched)
                .as("searched up front: add " + variant + " to VARIANTS")
                .isNotNull();
        Search s = searched.get();
        String output = s.output();
        assertThat(output).as("search depth").doesNotContain("max search depth too small");
        int errors = Integer.parseInt(find(ERRORS, output, "errors: N", output));
        long states = Long.parseLong(find(STATES, output, "N states, stored", output));
        String trail = s.trail();
        String violated = "none";
        if (errors > 0) {
            Matcher m = VIOLATION.matcher(output);
            violated = m.find() ? m.group(1).replaceAll("\\s+", "") + "@depth" + m.group(2) : "invalid-end-state";
            System.out.println("SPIN counterexample for " + variant + ":\n" + trail);
        }
        // rounds = states explored; the figures say what the counterexample shows, if any.
        Chaos.figure("model-" + variant)
                .rounds(states)
                .lost(violated.contains("acked") ? 1 : 0)
                .appliedTwice(violated.contains("effect[e]<=1") ? 1 : 0)
                .put("stale_write_accepted", violated.contains("lastWrite") ? 1 : 0)
                .put("sent_not_as_committed", violated.contains("intended") ? 1 : 0)
                .put("wrong_outcome", violated.contains("applied[m]") ? 1 : 0)
                .put("errors", errors)
                .put("violated", violated)
                .broken(define == null ? null : define.toLowerCase())
                .print();
        return new Result(errors, states, output, trail);
    }

    private static String find(Pattern p, String text, String what, String output) {
        Matcher m = p.matcher(text);
        if (!m.find()) {
            throw new AssertionError("pan printed no '" + what + "':\n" + output);
        }
        return m.group(1);
    }

    private static String[] concat(List<String> head, String... tail) {
        List<String> all = new ArrayList<>(head);
        all.addAll(List.of(tail));
        return all.toArray(String[]::new);
    }

    /** Runs a command in {@code dir}; returns its output; fails on a non-zero exit or after 2 minutes. */
    private static String run(Path dir, String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command)
                .directory(dir.toFile())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(2, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " did not finish in 2 minutes:\n" + out);
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " exited with " + p.exitValue() + ":\n" + out);
        }
        return out;
    }
}
