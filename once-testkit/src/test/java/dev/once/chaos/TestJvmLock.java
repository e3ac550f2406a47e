package dev.once.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Lets this module's test JVMs (surefire runs two, each taking the next class) run side by side
 * except beside a {@link RunsAlone} class: every top-level test class holds a lock on
 * {@value #FILE} from before its {@code @BeforeAll} until after its {@code @AfterAll}, an exclusive
 * one for a {@link RunsAlone} class and a shared one otherwise. So a throughput baseline and the
 * recovery measured against it see the same machine. Registered for every class of the module by
 * {@code junit-platform.properties} (extension auto-detection, restricted to this class).
 */
public final class TestJvmLock implements BeforeAllCallback {

    static final String FILE = "target/test-jvms.lock";

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        Class<?> testClass = context.getRequiredTestClass();
        if (testClass.getEnclosingClass() != null) {
            return; // a nested class runs inside its top-level class, which holds the lock already
        }
        boolean alone = testClass.isAnnotationPresent(RunsAlone.class);
        Path file = Path.of(FILE);
        Files.createDirectories(file.getParent());
        FileChannel channel =
                FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
        FileLock lock;
        long asked = System.nanoTime();
        try {
            lock = channel.lock(0, Long.MAX_VALUE, !alone); // blocks while the other JVM holds a conflicting lock
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
        System.out.printf(
                "TestJvmLock: %s holds the %s lock after waiting %d ms%n",
                testClass.getSimpleName(), alone ? "exclusive" : "shared", (System.nanoTime() - asked) / 1_000_000);
        context.getStore(ExtensionContext.Namespace.create(TestJvmLock.class)).put("lock", (AutoCloseable)
                () -> { // closed by JUnit after the class's @AfterAll
                    try (channel) {
                        lock.release();
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                });
    }
}
