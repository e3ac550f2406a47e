package dev.once.adapter;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.StreamPositions;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The driver's loop with a broker made of strings and an engine whose outcome is named in the
 * event id ({@code ok-…}, {@code retry-…}, {@code poison-…}); the real brokers run it in each
 * adapter's tests.
 */
class AdapterDriverTest {

    private static final RetryPolicy FAST = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(1))
            .maxDelay(Duration.ofMillis(5))
            .build();

    /** A broker of strings: "?x" carries no event id; "g:id" is id in group g. */
    private static final class Strings implements Broker<String> {
        final List<List<String>> settled = new CopyOnWriteArrayList<>();
        final List<String> settledVerdicts = new CopyOnWriteArrayList<>();
        final List<String> released = new CopyOnWriteArrayList<>();
        final List<Throwable> abandoned = new CopyOnWriteArrayList<>();
        volatile String refuseDeadLetterOf;

        @Override
        public Delivery delivery(String m) {
            if (m.startsWith("?")) {
                throw new InvalidDeliveryException("no event id in " + m);
            }
            return Delivery.of(id(m), m);
        }

        @Override
        public String describe(String m) {
            return "msg:" + m;
        }

        @Override
        public void settle(List<Processed<String>> processed) {
            List<String> batch = new ArrayList<>();
            for (Processed<String> p : processed) {
                if (p.verdict() == Verdict.DEAD_LETTER && p.message().equals(refuseDeadLetterOf)) {
                    throw new IllegalStateException("dead-letter send of " + p.message() + " failed");
                }
                batch.add(p.message());
                settledVerdicts.add(p.message() + "=" + p.verdict());
            }
            settled.add(batch);
        }

        @Override
        public void release(List<String> messages) {
            released.addAll(messages);
        }

        @Override
        public void abandon(Throwable cause) {
            abandoned.add(cause);
        }
    }

    private static String id(String m) {
        int colon = m.indexOf(':');
        return colon < 0 ? m : m.substring(colon + 1);
    }

    /** Outcome by id prefix; processBatch runs {@code before} first; ordered runs with positions are recorded. */
    private static final class Scripted implements IdempotentConsumer {
        final List<String> processed = new CopyOnWriteArrayList<>();
        final List<StreamPositions> positions = new CopyOnWriteArrayList<>();
        volatile Runnable before = () -> {};

        @Override
        public String consumer() {
            return "test";
        }

        @Override
        public Inbox inbox() {
            throw new UnsupportedOperationException();
        }

        @Override
        public Outcome process(Delivery d) {
            return processBatch(List.of(d)).get(0);
        }

        @Override
        public List<Outcome> processInOrder(List<Delivery> ds, StreamPositions at) {
            positions.add(at);
            return processBatch(ds);
        }

        @Override
        public List<Outcome> processBatch(List<Delivery> ds) {
            before.run();
            List<Outcome> out = new ArrayList<>();
            for (Delivery d : ds) {
                processed.add(d.eventId());
                Status s = d.eventId().startsWith("ok")
                        ? Status.APPLIED
                        : d.eventId().startsWith("poison") ? Status.FAILED_PERMANENT : Status.FAILED_RETRYABLE;
                out.add(new Outcome(d.eventId(), s, s == Status.APPLIED ? null : new IllegalStateException(s.name())));
            }
            return out;
        }
    }

    /** Hands out the given batches, then stops the driver. */
    private static Receiver<String> batches(AdapterDriver<String>[] driver, List<List<String>> batches) {
        List<List<String>> left = Collections.synchronizedList(new ArrayList<>(batches));
        return () -> {
            if (left.isEmpty()) {
                driver[0].stop();
                return List.of();
            }
            return left.remove(0);
        };
    }

    @SuppressWarnings("unchecked")
    private static AdapterDriver<String>[] holder() {
        return new AdapterDriver[1];
    }

    @Test
    void undecodableMessageIsAPermanentFailureOfItsOwnAndTheRestIsOneTransaction() {
        Strings broker = new Strings();
        Scripted engine = new Scripted();
        AdapterDriver<String>[] d = holder();
        d[0] = AdapterDriver.builder("t", engine, broker).receiveRetries(FAST).build();
        d[0].run(batches(d, List.of(List.of("ok-1", "?x", "retry-2", "ok-3"))));
        assertThat(broker.settled).containsExactly(List.of("ok-1", "?x", "retry-2", "ok-3"));
        assertThat(broker.settledVerdicts)
                .containsExactly("ok-1=ACKNOWLEDGE", "?x=DEAD_LETTER", "retry-2=REDELIVER", "ok-3=ACKNOWLEDGE");
        assertThat(engine.processed).containsExactly("ok-1", "retry-2", "ok-3");
        assertThat(d[0].failure()).isEmpty();
    }

    @Test
    void aBatchThatFailedOutsideTheHandlerIsSettledAsRetryableAndTheLoopGoesOn() {
        Strings broker = new Strings();
        Scripted engine = new Scripted();
        AtomicInteger calls = new AtomicInteger();
        engine.before = () -> {
            if (calls.incrementAndGet() == 1) {
                throw new IllegalStateException("pool closed");
            }
        };
        AdapterDriver<String>[] d = holder();
        d[0] = AdapterDriver.builder("t", engine, broker).receiveRetries(FAST).build();
        d[0].run(batches(d, List.of(List.of("ok-1"), List.of("ok-2"))));
        assertThat(broker.settledVerdicts)
                .as("requeued before the next batch is acknowledged")
                .containsExactly("ok-1=REDELIVER", "ok-2=ACKNOWLEDGE");
        assertThat(d[0].failure()).isEmpty();
    }

    @Test
    void anErrorStopsTheDriverVisiblyAndAbandonsTheUnsettled() {
        Strings broker = new Strings();
        Scripted engine = new Scripted();
        engine.before = () -> {
            throw new OutOfMemoryError("simulated");
        };
        AdapterDriver<String>[] d = holder();
        d[0] = AdapterDriver.builder("t", engine, broker).receiveRetries(FAST).build();
        d[0].run(batches(d, List.of(List.of("ok-1"), List.of("ok-2"))));
        assertThat(d[0].failure()).containsInstanceOf(OutOfMemoryError.class);
        assertThat(d[0].isRunning()).isFalse();
        assertThat(broker.abandoned).hasSize(1);
        assertThat(broker.settled).as("nothing settled, nothing more received").isEmpty();
    }

    @Test
    void inGroupOrderAMessageNotSettledHoldsBackItsGroupOnly() {
        Strings broker = new Strings();
        broker.refuseDeadLetterOf = "g:poison-2";
        Scripted engine = new Scripted();
        AdapterDriver<String>[] d = holder();
        d[0] = AdapterDriver.builder("t", engine, broker)
                .receiveRetries(FAST)
                .inGroupOrder(m -> m.substring(0, m.indexOf(':')))
                .build();
        d[0].run(batches(d, List.of(List.of("g:ok-1", "h:ok-1h", "g:poison-2", "h:retry-2h", "g:ok-3", "h:ok-3h"))));
        assertThat(engine.processed)
                .as("one by one, each group in order, up to the first not settled")
                .containsExactly("ok-1", "poison-2", "ok-1h", "retry-2h");
        assertThat(broker.released).containsExactlyInAnyOrder("g:ok-3", "h:ok-3h");
        assertThat(broker.settledVerdicts)
                .containsExactly("g:ok-1=ACKNOWLEDGE", "h:ok-1h=ACKNOWLEDGE", "h:retry-2h=REDELIVER");
    }

    @Test
    void processAgainOfAMessageInGroupOrderGoesThroughItsGroupsPosition() {
        Scripted engine = new Scripted();
        AdapterDriver<String> positioned = AdapterDriver.builder("t", engine, new Strings())
                .inGroupOrder(m -> m.substring(0, m.indexOf(':')))
                .groupPositions(group -> "stream-" + group, m -> BigInteger.valueOf(m.length()))
                .build();
        assertThat(positioned
                        .processAgain("g:ok-1", Delivery.of("ok-1", "g:ok-1"))
                        .status())
                .isEqualTo(Status.APPLIED);
        assertThat(engine.positions)
                .as("as the first try went: a message its group went on without is refused")
                .containsExactly(new StreamPositions("stream-g", List.of(BigInteger.valueOf(6))));

        AdapterDriver<String> plain =
                AdapterDriver.builder("t", engine, new Strings()).build();
        assertThat(plain.processAgain("g:ok-2", Delivery.of("ok-2", "g:ok-2")).status())
                .isEqualTo(Status.APPLIED);
        assertThat(engine.positions).as("no positions without group order").hasSize(1);
        assertThat(engine.processed).containsExactly("ok-1", "ok-2");
    }

    @Test
    void aFailedReceiveIsRetriedAfterABackoff() {
        Strings broker = new Strings();
        AtomicInteger receives = new AtomicInteger();
        AdapterDriver<String>[] d = holder();
        d[0] = AdapterDriver.builder("t", new Scripted(), broker)
                .receiveRetries(FAST)
                .build();
        d[0].run(() -> switch (receives.incrementAndGet()) {
            case 1, 2 -> throw new java.io.IOException("connection reset");
            case 3 -> List.of("ok-1");
            default -> {
                d[0].stop();
                yield List.of();
            }
        });
        assertThat(broker.settledVerdicts).containsExactly("ok-1=ACKNOWLEDGE");
        assertThat(d[0].failure()).isEmpty();
    }
}
