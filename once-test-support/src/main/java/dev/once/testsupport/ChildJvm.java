package dev.once.testsupport;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A JVM started from the test's own class path, for faults a thread cannot fake: SIGKILL between
 * a commit and an ack, SIGSTOP past a lease's expiry. The child prints markers on stdout
 * ({@code COMMITTED evt-1}); the test waits for a marker (never sleeps) and then strikes.
 */
public final class ChildJvm implements AutoCloseable {

    private final Process process;
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final Object lock = new Object();

    private ChildJvm(Process process) {
        this.process = process;
        Thread reader = new Thread(
                () -> {
                    try (BufferedReader r = new BufferedReader(
                            new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = r.readLine()) != null) {
                            lines.add(line);
                            synchronized (lock) {
                                lock.notifyAll();
                            }
                        }
                    } catch (IOException ignored) {
                        // the child died: that is what these tests do to it
                    }
                    synchronized (lock) {
                        lock.notifyAll();
                    }
                },
                "child-jvm-stdout-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Starts {@code main} in a new JVM on {@link #classPath()}, with extra environment and arguments. */
    public static ChildJvm start(Class<?> main, Map<String, String> environment, String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx256m");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-cp");
        command.add(classPath());
        command.add(main.getName());
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().putAll(environment);
        return new ChildJvm(pb.start());
    }

    /**
     * Every entry of this JVM's class path and module path, as one class path: a child started on it
     * can run any class this JVM can, whether the test runs its libraries as modules or not, and
     * needs no path to a local repository.
     */
    public static String classPath() {
        return Stream.of(System.getProperty("java.class.path"), System.getProperty("jdk.module.path"))
                .filter(path -> path != null && !path.isEmpty())
                .collect(Collectors.joining(File.pathSeparator));
    }

    public long pid() {
        return process.pid();
    }

    /** Every line the child printed so far. */
    public List<String> output() {
        return List.copyOf(lines);
    }

    /**
     * Waits until the child prints a line matching {@code marker}, and returns it.
     *
     * @throws IllegalStateException if the child exits first or {@code timeout} passes, with its output
     */
    public String awaitLine(Predicate<String> marker, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        int checked = 0;
        synchronized (lock) {
            while (true) {
                while (checked < lines.size()) {
                    String line = lines.get(checked++);
                    if (marker.test(line)) {
                        return line;
                    }
                }
                long left = deadline - System.nanoTime();
                if (!process.isAlive() && checked >= lines.size()) {
                    throw new IllegalStateException("child " + pid() + " exited with " + process.exitValue()
                            + " before printing the awaited marker; output:\n" + String.join("\n", lines));
                }
                if (left <= 0) {
                    throw new IllegalStateException("child " + pid() + " did not print the awaited marker within "
                            + timeout + "; output:\n" + String.join("\n", lines));
                }
                lock.wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 200)));
            }
        }
    }

    /** Waits for a line that starts with {@code prefix}. */
    public String awaitLineStartingWith(String prefix, Duration timeout) throws InterruptedException {
        return awaitLine(l -> l.startsWith(prefix), timeout);
    }

    /** SIGKILL: no shutdown hook, no finally block, no last ack. Waits until the process is gone. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    /** SIGSTOP: the process freezes mid-flight, as in a long GC pause or a VM migration. */
    public void pause() throws IOException, InterruptedException {
        signal("STOP");
    }

    /** SIGCONT: the paused process resumes, unaware that time passed. */
    public void resume() throws IOException, InterruptedException {
        signal("CONT");
    }

    private void signal(String name) throws IOException, InterruptedException {
        int rc = new ProcessBuilder("kill", "-" + name, Long.toString(pid()))
                .inheritIO()
                .start()
                .waitFor();
        if (rc != 0) {
            throw new IOException("kill -" + name + " " + pid() + " exited with " + rc);
        }
    }

    /** Waits for a normal exit and returns the exit code. */
    public int waitFor(Duration timeout) throws InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException(
                    "child " + pid() + " still running after " + timeout + "; output:\n" + String.join("\n", lines));
        }
        return process.exitValue();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            // Not interruptible, so try-with-resources needs no InterruptedException: a test that is
            // torn down must not leave a child behind, interrupted or not.
            try {
                resume();
                kill();
            } catch (IOException ignored) {
                process.destroyForcibly(); // not paused, or already gone
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
