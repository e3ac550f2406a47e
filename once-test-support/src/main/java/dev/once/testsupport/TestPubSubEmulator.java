package dev.once.testsupport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Google's Pub/Sub emulator for tests: the one at {@value #HOST_ENV} ({@code host:port}) when set,
 * otherwise the {@code cloud-pubsub-emulator} script of the Google Cloud CLI package
 * {@code google-cloud-cli-pubsub-emulator}, started once per JVM on a free port (it takes about
 * 10 s on the JDK) and stopped with the JVM. The emulator keeps everything in memory, so topics
 * and subscriptions vanish with it.
 */
public final class TestPubSubEmulator {

    /** The emulator to use instead of starting one, {@code host:port}: the variable Google's clients read. */
    public static final String HOST_ENV = "PUBSUB_EMULATOR_HOST";
    /** Path of the {@code cloud-pubsub-emulator} script, when it is not where Debian's package puts it. */
    public static final String SCRIPT_ENV = "ONCE_PUBSUB_EMULATOR";
    /** Where the Debian package {@code google-cloud-cli-pubsub-emulator} installs the script. */
    public static final String DEFAULT_SCRIPT =
            "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator";
    /** How to get it, in every skip message. */
    public static final String HOW_TO_GET = "install Google's Pub/Sub emulator (apt-get install"
            + " google-cloud-cli-pubsub-emulator from Google's Cloud SDK apt repository, or gcloud components install"
            + " pubsub-emulator and set " + SCRIPT_ENV + " to its bin/cloud-pubsub-emulator), or set " + HOST_ENV
            + " to a running emulator";

    private static final Duration STARTUP = Duration.ofMinutes(2);
    private static volatile String host;

    private TestPubSubEmulator() {}

    /**
     * {@code host:port} of the emulator shared by every test of this JVM, started on first use.
     * Skips the calling test (or fails it under {@value Services#REQUIRE_ENV} listing {@code pubsub})
     * when there is none.
     */
    public static String host() {
        String h = host;
        if (h == null) {
            synchronized (TestPubSubEmulator.class) {
                h = host;
                if (h == null) {
                    h = start();
                    host = h;
                }
            }
        }
        return h;
    }

    private static String start() {
        String given = System.getenv(HOST_ENV);
        if (given != null && !given.isBlank()) {
            if (!listening(given)) {
                throw Services.unavailable("pubsub", "start the emulator at " + given + " or unset " + HOST_ENV, null);
            }
            return given;
        }
        Path script = Path.of(System.getenv().getOrDefault(SCRIPT_ENV, DEFAULT_SCRIPT));
        if (!Files.isExecutable(script)) {
            throw Services.unavailable(
                    "pubsub", HOW_TO_GET, new IOException("no executable Pub/Sub emulator script at " + script));
        }
        try {
            int port = FreePorts.loopback();
            Path log = Files.createTempFile("once-pubsub-emulator-", ".log");
            Process p = new ProcessBuilder(List.of(script.toString(), "--host=127.0.0.1", "--port=" + port))
                    .redirectErrorStream(true)
                    .redirectOutput(log.toFile())
                    .start();
            Runtime.getRuntime()
                    .addShutdownHook(new Thread(
                            () -> {
                                // the script starts a java child: stop the whole tree
                                p.descendants().forEach(ProcessHandle::destroy);
                                p.destroy();
                            },
                            "once-pubsub-emulator-stop"));
            String address = "127.0.0.1:" + port;
            long deadline = System.nanoTime() + STARTUP.toNanos();
            while (!serverStarted(log) || !listening(address)) {
                if (!p.isAlive()) {
                    throw new IOException(
                            "the emulator exited with " + p.exitValue() + "; its output: " + Files.readString(log));
                }
                if (System.nanoTime() > deadline) {
                    p.descendants().forEach(ProcessHandle::destroy);
                    p.destroy();
                    throw new IOException("the emulator did not start within " + STARTUP + "; its output is in " + log);
                }
                Thread.sleep(100); // polling a child process's start-up: there is nothing to wait on
            }
            return address;
        } catch (IOException e) {
            throw Services.unavailable("pubsub", HOW_TO_GET, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw Services.unavailable("pubsub", HOW_TO_GET, e);
        }
    }

    private static boolean serverStarted(Path log) throws IOException {
        return Files.readString(log).contains("Server started");
    }

    private static boolean listening(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        try (Socket s = new Socket()) {
            s.connect(
                    new InetSocketAddress(
                            hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1))),
                    1000);
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }
}
