package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.github.javaparser.ParserConfiguration;
import com.github.javaparser.StaticJavaParser;
import com.github.javaparser.ast.expr.MethodCallExpr;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every module's tests start their concurrent tasks on threads of their own
 * ({@code dev.once.testsupport.OwnThreads}), never on the common pool: {@code supplyAsync(task)} and
 * {@code runAsync(task)} without an executor run on one worker fewer than the machine has cores, so
 * tests whose tasks wait for each other passed on this project's two-core machines and failed on
 * four cores (NewStreamsAtOnceTest's four runs at a barrier; the README's test command must pass on
 * a user's machine too). Read from the sources, so that a new test cannot bring the form back.
 */
class TestTasksOwnTheirThreadsTest {

    private static final Set<String> ON_THE_COMMON_POOL = Set.of("supplyAsync", "runAsync");

    @Test
    void noTestRunsItsTasksOnTheCommonPool() throws IOException {
        StaticJavaParser.getParserConfiguration().setLanguageLevel(ParserConfiguration.LanguageLevel.JAVA_17);
        List<String> found = new ArrayList<>();
        List<Path> sources;
        try (Stream<Path> modules = Files.list(Path.of(".."))) {
            sources = modules.map(m -> m.resolve("src/test/java"))
                    .filter(Files::isDirectory)
                    .flatMap(TestTasksOwnTheirThreadsTest::javaFiles)
                    .toList();
        }
        for (Path source : sources) {
            String text = Files.readString(source);
            if (ON_THE_COMMON_POOL.stream().noneMatch(name -> text.contains(name + "("))) {
                continue; // parsing only the files that name one keeps this test under a second
            }
            StaticJavaParser.parse(text).findAll(MethodCallExpr.class).stream()
                    .filter(call -> ON_THE_COMMON_POOL.contains(call.getNameAsString())
                            && call.getArguments().size() == 1)
                    .forEach(call -> found.add(Path.of("..").relativize(source) + ":"
                            + call.getBegin().map(p -> p.line).orElse(0) + " " + call.getNameAsString()));
        }
        assertThat(sources)
                .as("the modules' test sources, read from the repository")
                .hasSizeGreaterThan(100);
        assertThat(found)
                .as("pass OwnThreads.each() as the executor: on the common pool, tasks that wait for each other"
                        + " time out on machines with three to n cores")
                .isEmpty();
    }

    private static Stream<Path> javaFiles(Path dir) {
        try (Stream<Path> files = Files.walk(dir)) {
            return files.filter(f -> f.toString().endsWith(".java")).toList().stream();
        } catch (IOException e) {
            throw new IllegalStateException("cannot list " + dir, e);
        }
    }
}
