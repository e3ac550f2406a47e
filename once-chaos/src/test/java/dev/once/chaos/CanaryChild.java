package dev.once.chaos;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.MismatchPolicy;
import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The JVM of {@link SecretsNeverLoggedTest}: every SLF4J logger at TRACE on stdout, then the paths
 * that log (applied, duplicate, retryable and permanent failures, an event id reused for a
 * different payload, outbox sends that fail and are retried, idempotency keys completed and
 * replayed) with a secret in every payload, header value, outbox row and saved result. Prints {@code PROBE <probe>} through a logger of its own at TRACE
 * (so the test knows TRACE lines are captured) and {@code DONE} at the end.
 * Arguments: JDBC URL of the test's schema, the secret, the probe.
 */
public final class CanaryChild {

    private CanaryChild() {}

    public static void main(String[] args) throws Exception {
        // Before the first logger exists: the levels a user could set, all of them at once.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "trace");
        System.setProperty("org.slf4j.simpleLogger.log.dev.once", "trace");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.out");
        String url = args[0];
        String secret = args[1];
        org.slf4j.LoggerFactory.getLogger(CanaryChild.class).trace("PROBE {}", args[2]);

        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url);
        config.setMaximumPoolSize(4);
        try (HikariDataSource ds = new HikariDataSource(config)) {
            Map<String, String> headers = Map.of("authorization", "Bearer " + secret, "x-card", secret);
            byte[] payload = ("{\"card\":\"" + secret + "\"}").getBytes(StandardCharsets.UTF_8);
            AtomicInteger calls = new AtomicInteger();
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(ds)
                    .consumer("canary")
                    .meterRegistry(new SimpleMeterRegistry())
                    .handler((d, tx) -> {
                        tx.outbox().add("payments", "key", d.payload(), d.headers(), "charge:" + d.eventId());
                        if (d.eventId().startsWith("retry") && calls.incrementAndGet() == 1) {
                            throw new RetryableException("card service busy");
                        }
                        if (d.eventId().startsWith("poison")) {
                            throw new PermanentFailureException("amount is not a number");
                        }
                    })
                    .build();
            for (String id : new String[] {"ok-1", "retry-1", "poison-1"}) {
                Delivery d = new Delivery(id, "payment", payload, headers, 1, false, "test:canary");
                // A user logging the delivery as it arrives: Delivery.toString names headers, never their values.
                org.slf4j.LoggerFactory.getLogger(CanaryChild.class).info("received {}", d);
                once.process(d);
                once.process(d.redelivery());
                once.processBatch(java.util.List.of(
                        d.redelivery(), new Delivery(id + "-b", "payment", payload, headers, 1, false, "test:canary")));
            }
            // An event id reused for a different payload: logged with fingerprints, never the payload.
            IdempotentConsumer strict = IdempotentConsumer.builder()
                    .dataSource(ds)
                    .consumer("canary-fingerprints")
                    .meterRegistry(new SimpleMeterRegistry())
                    .onMismatch(MismatchPolicy.FAIL_PERMANENT)
                    .handler((d, tx) -> {})
                    .build();
            byte[] other = ("{\"card\":\"" + secret + "\",\"amount\":2}").getBytes(StandardCharsets.UTF_8);
            Delivery first = new Delivery("reused-1", "payment", payload, headers, 1, false, "test:canary");
            Delivery reused = new Delivery("reused-1", "payment", other, headers, 1, false, "test:canary");
            strict.process(first);
            strict.process(reused);
            strict.processBatch(java.util.List.of(
                    reused,
                    new Delivery("reused-2", "payment", payload, headers, 1, false, "test:canary"),
                    new Delivery("reused-2", "payment", other, headers, 1, false, "test:canary")));
            AtomicInteger sends = new AtomicInteger();
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(ds)
                    .meterRegistry(new SimpleMeterRegistry())
                    .retryPolicy(dev.once.RetryPolicy.builder()
                            .initialDelay(Duration.ofMillis(1))
                            .maxDelay(Duration.ofMillis(1))
                            .maxRetries(2)
                            .build())
                    .publisher(m -> {
                        if (sends.incrementAndGet() % 2 == 1) {
                            throw new PublishFailure("broker unavailable", true, new Receipt(503, "try later"));
                        }
                        return new Receipt(200, "accepted");
                    })
                    .build();
            for (int i = 0; i < 20 && relay.relayOnce() > 0 || i < 5; i++) {
                // a few rounds: failures are retried after the (1 ms) backoff
            }
            IdempotencyKeys keys = IdempotencyKeys.builder().dataSource(ds).build();
            if (keys.begin("canary", "k-1", "fp") instanceof BeginResult.Started s) {
                keys.complete(s, 200, ("{\"token\":\"" + secret + "\"}").getBytes(StandardCharsets.UTF_8));
            }
            keys.begin("canary", "k-1", "fp");
            keys.begin("canary", "k-1", "other-fp");
        }
        System.out.println("DONE");
    }
}
