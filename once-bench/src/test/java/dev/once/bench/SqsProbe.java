package dev.once.bench;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.sqs.SqsPublisher;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;

/**
 * The SQS publisher's cost per message against ElasticMQ in this process, without the relay and its
 * database: this JVM's CPU (the in-process broker's included) and the bytes every thread allocated, per
 * message, for the relay suite's bare loop ({@value #BARE_THREADS} threads of synchronous
 * {@code SendMessageBatch} of ten) and for {@link SqsPublisher#publishAll} called as {@value #RELAYS} relays
 * call it (batches of {@value #BATCH} rows, each waited for), alternating. The rows as the relay suite's:
 * body "1", no headers, the event id attribute. Figures independent of the machine's load are CPU and
 * bytes per message (the ratio of the two rows above all).
 * {@code java -cp <test classpath> dev.once.bench.SqsProbe [seconds per turn] [turns] [bare|publisher|both]}
 */
final class SqsProbe {

    static final int BARE_THREADS = 40;
    static final int RELAYS = 4;
    static final int BATCH = 1000;

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        int turns = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        String what = args.length > 2 ? args[2] : "both";
        if (what.equals("stub")) {
            stub(seconds, turns);
            return;
        }
        SQSRestServer server = SQSRestServerBuilder.withInterface("127.0.0.1")
                .withDynamicPort()
                .start();
        try {
            int port = server.waitUntilStarted().localAddress().getPort();
            try (SqsClient client = SqsClient.builder()
                    .endpointOverride(URI.create("http://127.0.0.1:" + port))
                    .region(Region.US_EAST_1)
                    .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                    .build()) {
                SqsPublisher publisher = new SqsPublisher(client);
                Map<String, double[]> totals = new HashMap<>();
                for (int turn = 0; turn < turns + 1; turn++) {
                    boolean print = turn > 0; // the first warms up
                    for (String row : what.equals("both")
                            ? (turn % 2 == 0 ? List.of("bare", "publisher") : List.of("publisher", "bare"))
                            : List.of(what)) {
                        String queue = row + "-" + System.nanoTime();
                        client.createQueue(r -> r.queueName(queue));
                        double[] r = row.equals("bare")
                                ? measure(() -> bare(client, queue, seconds))
                                : measure(() -> relayed(publisher, queue, seconds));
                        if (print) {
                            System.out.printf(
                                    Locale.ROOT,
                                    "SQSPROBE %s messages/s=%.0f cpu_us_per_message=%.1f bytes_per_message=%.0f%n",
                                    row,
                                    r[0] / seconds,
                                    r[1] / r[0] / 1e3,
                                    r[2] / r[0]);
                            double[] t = totals.computeIfAbsent(row, k -> new double[3]);
                            for (int i = 0; i < 3; i++) {
                                t[i] += r[i];
                            }
                        }
                        client.deleteQueue(d -> d.queueUrl(
                                client.getQueueUrl(g -> g.queueName(queue)).queueUrl()));
                    }
                }
                for (var e : totals.entrySet()) {
                    double[] t = e.getValue();
                    System.out.printf(
                            Locale.ROOT,
                            "SQSPROBE total %s cpu_us_per_message=%.1f bytes_per_message=%.0f%n",
                            e.getKey(),
                            t[1] / t[0] / 1e3,
                            t[2] / t[0]);
                }
            }
        } finally {
            server.stopAndWait();
        }
    }

    /**
     * The publisher's own cost, without the SDK's HTTP or a broker: {@link SqsPublisher#publishAll} on a client
     * that answers every {@code SendMessageBatch} at once, every entry stored, on this thread and the
     * publisher's; CPU and bytes per message of the whole process.
     */
    private static void stub(double seconds, int turns) throws Exception {
        SqsClient answering = new SqsClient() {
            @Override
            public String serviceName() {
                return "sqs";
            }

            @Override
            public void close() {}

            @Override
            public software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse sendMessageBatch(
                    software.amazon.awssdk.services.sqs.model.SendMessageBatchRequest request) {
                List<software.amazon.awssdk.services.sqs.model.SendMessageBatchResultEntry> ok =
                        new ArrayList<>(request.entries().size());
                for (SendMessageBatchRequestEntry e : request.entries()) {
                    ok.add(software.amazon.awssdk.services.sqs.model.SendMessageBatchResultEntry.builder()
                            .id(e.id())
                            .messageId("m")
                            .build());
                }
                var response = software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse.builder()
                        .successful(ok)
                        .failed(List.of());
                response.sdkHttpResponse(software.amazon.awssdk.http.SdkHttpResponse.builder()
                        .statusCode(200)
                        .build());
                return response.build();
            }
        };
        SqsPublisher publisher = new SqsPublisher(answering);
        String queue = "http://127.0.0.1:1/000000000000/stub";
        double[] total = new double[3];
        for (int turn = 0; turn < turns + 1; turn++) {
            double[] r = measure(() -> relayed(publisher, queue, seconds));
            if (turn > 0) {
                System.out.printf(
                        Locale.ROOT,
                        "SQSPROBE stub messages/s=%.0f cpu_us_per_message=%.2f bytes_per_message=%.0f%n",
                        r[0] / seconds,
                        r[1] / r[0] / 1e3,
                        r[2] / r[0]);
                for (int i = 0; i < 3; i++) {
                    total[i] += r[i];
                }
            }
        }
        System.out.printf(
                Locale.ROOT,
                "SQSPROBE total stub cpu_us_per_message=%.2f bytes_per_message=%.0f%n",
                total[1] / total[0] / 1e3,
                total[2] / total[0]);
    }

    interface Loop {
        long run() throws Exception;
    }

    /** Messages, this JVM's CPU nanoseconds, bytes allocated by every thread alive before and after. */
    private static double[] measure(Loop loop) throws Exception {
        long[] ids = THREADS.getAllThreadIds();
        long[] before = THREADS.getThreadAllocatedBytes(ids);
        long cpu = cpuNanos();
        ENDED.set(0);
        long n = loop.run();
        long cpuUsed = cpuNanos() - cpu;
        long[] after = THREADS.getThreadAllocatedBytes(ids);
        long bytes = ENDED.get();
        for (int i = 0; i < ids.length; i++) {
            if (before[i] >= 0 && after[i] >= 0) {
                bytes += after[i] - before[i];
            }
        }
        return new double[] {n, cpuUsed, bytes};
    }

    /** Bytes of threads started and ended within a measurement. */
    private static final AtomicLong ENDED = new AtomicLong();

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** The relay suite's bound loop. */
    private static long bare(SqsClient client, String queue, double s) throws Exception {
        String url = client.getQueueUrl(r -> r.queueName(queue)).queueUrl();
        AtomicLong acked = new AtomicLong();
        long end = System.nanoTime() + (long) (s * 1e9);
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < BARE_THREADS; t++) {
            String prefix = "bare:" + t + ":";
            Thread thread = new Thread(() -> {
                long a0 = THREADS.getCurrentThreadAllocatedBytes();
                for (long n = 0; System.nanoTime() < end; n += SqsPublisher.MAX_BATCH) {
                    List<SendMessageBatchRequestEntry> entries = RelaySuite.sqsEntries(prefix, n);
                    acked.addAndGet(client.sendMessageBatch(r -> r.queueUrl(url).entries(entries))
                            .successful()
                            .size());
                }
                ENDED.addAndGet(THREADS.getCurrentThreadAllocatedBytes() - a0);
            });
            thread.start();
            running.add(thread);
        }
        for (Thread thread : running) {
            thread.join();
        }
        return acked.get();
    }

    /** {@link #RELAYS} threads, each handing the publisher a batch of rows and waiting for every stage. */
    private static long relayed(Publisher publisher, String queue, double s) throws Exception {
        AtomicLong acked = new AtomicLong();
        AtomicLong ids = new AtomicLong();
        long end = System.nanoTime() + (long) (s * 1e9);
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < RELAYS; t++) {
            // the rows made before the clock starts, and sent again each turn: the relay reads them from its
            // database, so what making them costs is not the publisher's
            List<OutboxMessage> rows = new ArrayList<>(BATCH);
            for (int i = 0; i < BATCH; i++) {
                long id = ids.incrementAndGet();
                String eventId = "bench:e" + id + "#1";
                rows.add(new OutboxMessage(
                        id, eventId, queue, "k" + (id % 64), new byte[] {'1'}, Map.of(), eventId, 0, null));
            }
            Thread thread = new Thread(() -> {
                long a0 = THREADS.getCurrentThreadAllocatedBytes();
                while (System.nanoTime() < end) {
                    for (CompletionStage<Receipt> r : publisher.publishAll(rows)) {
                        r.toCompletableFuture().join();
                        acked.incrementAndGet();
                    }
                }
                ENDED.addAndGet(THREADS.getCurrentThreadAllocatedBytes() - a0);
            });
            thread.start();
            running.add(thread);
        }
        for (Thread thread : running) {
            thread.join();
        }
        return acked.get();
    }
}
