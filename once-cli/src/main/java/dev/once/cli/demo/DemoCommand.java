package dev.once.cli.demo;

import dev.once.cli.internal.Failure;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code once demo}: the ledger page, or the same scenario headless. */
@Command(
        name = "demo",
        mixinStandardHelpOptions = true,
        description = {
            "Delivered twice, counted once: the ledger page.",
            "%nA naive consumer and a once consumer read the same Kafka topic in their own groups. Starts embedded"
                    + " PostgreSQL and Kafka (or uses --postgres / --kafka) and serves a page on localhost with a button"
                    + " for each real source of duplicates. --headless runs the same scenario and prints a table.%n"
        })
public final class DemoCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(
            names = "--port",
            defaultValue = "8080",
            description = "port of the page on localhost; 0 picks a free one (default: ${DEFAULT-VALUE})")
    int port;

    @Option(
            names = "--postgres",
            paramLabel = "URL",
            description = "JDBC URL of a PostgreSQL to use instead of the embedded one")
    String postgres;

    @Option(
            names = "--kafka",
            paramLabel = "HOST:PORT",
            description = "a Kafka broker to use instead of the embedded one")
    String kafka;

    @Option(
            names = "--schema",
            defaultValue = "once_demo",
            description = "PostgreSQL schema the demo owns; dropped and created afresh (default: ${DEFAULT-VALUE})")
    String schema;

    @Option(names = "--headless", description = "run without the page and print the side-by-side table")
    boolean headless;

    @Option(
            names = "--events",
            defaultValue = "20",
            description = "payments in a headless run (default: ${DEFAULT-VALUE})")
    int events;

    @Option(
            names = "--chaos",
            description = "headless: give payments the faults of the page's buttons (each at least once)")
    boolean chaos;

    @Option(
            names = "--seed",
            defaultValue = "1",
            description = "headless: seed of the chaos plan (default: ${DEFAULT-VALUE})")
    long seed;

    private static void requireFreePort(int port) {
        try (ServerSocket probe = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
            probe.setReuseAddress(true);
        } catch (IOException e) {
            throw Failure.usage(
                    "--port " + port + " is in use on localhost; pass another --port, or --port 0 for a free one");
        }
    }

    private static void status(PrintWriter err, String line) {
        err.println("once demo: " + line);
        err.flush();
    }

    @Override
    public Integer call() throws Exception {
        if (events < 1 || events > 10_000) {
            throw Failure.usage("--events must be between 1 and 10000, but was " + events);
        }
        if (port < 0 || port > 65_535) {
            throw Failure.usage("--port must be between 0 and 65535, but was " + port);
        }
        if (kafka != null && !kafka.matches("[^\\s:,]+:\\d{1,5}(,[^\\s:,]+:\\d{1,5})*")) {
            throw Failure.usage("--kafka '" + kafka + "' is not HOST:PORT; expected e.g. 127.0.0.1:9092");
        }
        if (postgres != null && !postgres.startsWith("jdbc:postgresql:")) {
            throw Failure.usage("--postgres '" + postgres + "' is not a PostgreSQL JDBC URL; expected"
                    + " jdbc:postgresql://HOST:PORT/DB?user=U");
        }
        if (!headless && port != 0) {
            requireFreePort(port); // before PostgreSQL and Kafka start, not after
        }
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Demo.Options options = new Demo.Options(postgres, kafka, schema);
        if (headless) {
            try (Demo demo = Demo.start(options, line -> status(err, line))) {
                Headless.run(demo, Headless.plan(events, chaos, seed), out, err);
            }
            return 0;
        }
        CountDownLatch stop = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        // Ctrl-C: this thread closes the server, the consumers, Kafka and PostgreSQL before the JVM goes.
        Runtime.getRuntime()
                .addShutdownHook(new Thread(
                        () -> {
                            stop.countDown();
                            try {
                                closed.await(15, TimeUnit.SECONDS);
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                        },
                        "once-demo-stop"));
        try (Demo demo = Demo.start(options, line -> status(err, line));
                DemoServer server = DemoServer.start(demo, port)) {
            out.println("once demo: open http://localhost:" + server.port() + "/  (Ctrl-C to stop)");
            out.flush();
            stop.await();
            status(err, "stopping");
        } finally {
            closed.countDown();
        }
        return 0;
    }
}
