package dev.once.bench;

import com.sun.management.OperatingSystemMXBean;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Receipt;
import dev.once.sqs.SqsPublisher;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;

/**
 * The relay's publish step alone against its hand-written floor, in one process and without a database:
 * {@link SqsPublisher#publishAll} of a relay batch of outbox rows (every stage joined, as the relay waits) beside
 * the same {@code SendMessageBatch} stream written by hand (the same entries, ten per request, the same number of
 * requests in flight on a pool of {@link SqsPublisher#CONCURRENT_REQUESTS} threads), on two clients of the same
 * configuration against ElasticMQ in this JVM, in alternating blocks of one batch each after a warm-up. Unlike the
 * test-scope {@code SqsProbe} (the relay suite's fastest bare loop against four relays' calls, in turns of
 * seconds), both rows here send the same requests in the same shape, so what differs is once's own code. Per
 * message: this process's CPU (ElasticMQ's, the SDK's and the sender's: the load-independent figure of the pair),
 * the bytes every thread allocated, and the wall time.
 * {@code java -cp once-bench/target/once-bench.jar dev.once.bench.SqsPublisherProbe [rounds] [batch]}; the last
 * line, {@code PROBE ratio}, is the publisher's CPU, bytes and wall time per message over the floor's.
 */
final class SqsPublisherProbe {

    private static final OperatingSystemMXBean OS =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 60;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 1_000;
        SQSRestServer server = SQSRestServerBuilder.withInterface("127.0.0.1")
                .withDynamicPort()
                .start();
        int port = server.waitUntilStarted().localAddress().getPort();
        ExecutorService pool = Executors.newFixedThreadPool(SqsPublisher.CONCURRENT_REQUESTS);
        try (SqsClient onceClient = client(port);
                SqsClient bareClient = client(port)) {
            String onceQueue = "probe-once";
            onceClient.createQueue(r -> r.queueName(onceQueue));
            String bareUrl =
                    bareClient.createQueue(r -> r.queueName("probe-bare")).queueUrl();
            SqsPublisher publisher = new SqsPublisher(onceClient);
            Map<String, Row> rows = new LinkedHashMap<>();
            long[] next = {0};
            rows.put("once-publishAll", () -> {
                List<OutboxMessage> messages = new ArrayList<>(batch);
                for (int i = 0; i < batch; i++) {
                    long n = next[0]++;
                    String id = "probe-" + n;
                    messages.add(new OutboxMessage(
                            n, id, onceQueue, null, new byte[] {'1'}, Map.of(), id, 0, Instant.now()));
                }
                int ok = 0;
                for (CompletionStage<Receipt> s : publisher.publishAll(messages)) {
                    s.toCompletableFuture().join();
                    ok++;
                }
                return ok;
            });
            rows.put("bare-SendMessageBatch", () -> {
                List<Future<Integer>> sent = new ArrayList<>();
                for (int from = 0; from < batch; from += SqsPublisher.MAX_BATCH) {
                    List<SendMessageBatchRequestEntry> entries = new ArrayList<>(SqsPublisher.MAX_BATCH);
                    for (int i = 0; i < SqsPublisher.MAX_BATCH && from + i < batch; i++) {
                        entries.add(RelaySuite.sqsEntry(i, "probe-" + next[0]++));
                    }
                    sent.add(pool.submit(() -> bareClient
                            .sendMessageBatch(r -> r.queueUrl(bareUrl).entries(entries))
                            .successful()
                            .size()));
                }
                int ok = 0;
                for (Future<Integer> f : sent) {
                    ok += f.get();
                }
                return ok;
            });
            run(rows, rounds / 4 + 1, batch, false); // warm-up (ElasticMQ's JIT above all), not printed
            run(rows, rounds, batch, true);
        } finally {
            pool.shutdownNow();
            server.stopAndWait();
        }
    }

    @FunctionalInterface
    private interface Row {
        /** Sends one relay batch and returns the messages SQS acknowledged. */
        int send() throws Exception;
    }

    private static void run(Map<String, Row> rows, int rounds, int batch, boolean print) throws Exception {
        Map<String, long[]> totals = new LinkedHashMap<>(); // CPU ns, bytes, wall ns, messages
        rows.keySet().forEach(k -> totals.put(k, new long[4]));
        List<String> order = new ArrayList<>(rows.keySet());
        for (int round = 0; round < rounds; round++) {
            for (int j = 0; j < order.size(); j++) {
                // the row that goes first alternates, so neither always follows the other's garbage
                String name = order.get((round + j) % order.size());
                long[] t = totals.get(name);
                long cpu = OS.getProcessCpuTime();
                long bytes = allocated();
                long wall = System.nanoTime();
                int ok = rows.get(name).send();
                t[2] += System.nanoTime() - wall;
                t[0] += OS.getProcessCpuTime() - cpu;
                t[1] += allocated() - bytes;
                t[3] += ok;
                if (ok != batch) {
                    throw new IllegalStateException(name + ": " + ok + " of " + batch + " acknowledged");
                }
            }
        }
        if (!print) {
            return;
        }
        for (var e : totals.entrySet()) {
            long[] t = e.getValue();
            System.out.printf(
                    Locale.ROOT,
                    "PROBE %s messages=%d cpu_us_per_message=%.1f bytes_per_message=%.0f messages_per_s=%.0f%n",
                    e.getKey(),
                    t[3],
                    t[0] / 1e3 / t[3],
                    (double) t[1] / t[3],
                    t[3] * 1e9 / t[2]);
        }
        long[] once = totals.get("once-publishAll");
        long[] bare = totals.get("bare-SendMessageBatch");
        System.out.printf(
                Locale.ROOT,
                "PROBE ratio once-publishAll/bare-SendMessageBatch cpu=%.3f bytes=%.3f wall=%.3f (per message)%n",
                (double) once[0] / bare[0],
                (double) once[1] / bare[1],
                (double) once[2] / bare[2]);
    }

    /** Bytes allocated so far by the live threads of this process (ElasticMQ's and the SDK's included). */
    private static long allocated() {
        long sum = 0;
        for (long b : THREADS.getThreadAllocatedBytes(THREADS.getAllThreadIds())) {
            sum += Math.max(0, b);
        }
        return sum;
    }

    private static SqsClient client(int port) {
        return SqsClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build();
    }
}
