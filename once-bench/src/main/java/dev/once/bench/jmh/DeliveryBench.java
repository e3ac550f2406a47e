package dev.once.bench.jmh;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.internal.Names;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * What constructing a {@link Delivery} costs, through its constructor (which copies the payload) and through
 * {@link Delivery#handingOver} (which keeps it), beside {@link Unmarked}: a record with the same components and the
 * same canonical constructor, validation and copies, and nothing else, the floor either path of {@code Delivery} is
 * measured against. An adapter builds one delivery per message, a Kafka record's shape here: a UUID event id, one
 * header, a short source. Run with {@code -prof gc} for bytes per operation.
 *
 * <p>Each sample times {@value #LOOP} constructions (tens of microseconds): on a loaded machine the thread is
 * descheduled during a few samples only, so read the median ({@code p0.50}), not the mean, which those few move.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@OperationsPerInvocation(DeliveryBench.LOOP)
@State(Scope.Thread)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xms256m", "-Xmx256m"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class DeliveryBench {

    static final int LOOP = 1000;

    /** Payload bytes: a small JSON event and a larger one. */
    @Param({"16", "512"})
    public int size;

    private String eventId;
    private byte[] payload;
    private Map<String, String> headers;
    private String source;

    @Setup(Level.Trial)
    public void setUp() {
        eventId = "0190f6f4-6c2a-7a1b-9c3d-5e4f60718293";
        payload = new byte[size];
        headers = Map.of("type", "payment-received");
        source = "kafka:orders/3@1234567";
    }

    @Benchmark
    public void constructor(Blackhole bh) {
        for (int i = 0; i < LOOP; i++) {
            bh.consume(new Delivery(eventId, "", payload, headers, 1, false, source));
        }
    }

    /** The array handed over: the bench keeps the one array, which no adapter would do, but nothing writes it. */
    @Benchmark
    public void handingOver(Blackhole bh) {
        for (int i = 0; i < LOOP; i++) {
            bh.consume(Delivery.handingOver(eventId, "", payload, headers, 1, false, source));
        }
    }

    @Benchmark
    public void unmarked(Blackhole bh) {
        for (int i = 0; i < LOOP; i++) {
            bh.consume(new Unmarked(eventId, "", payload, headers, 1, false, source));
        }
    }

    /** {@link Delivery}'s canonical constructor as it would be with nothing but its validation and copies. */
    public record Unmarked(
            String eventId,
            String type,
            byte[] payload,
            Map<String, String> headers,
            int attempt,
            boolean redelivered,
            String source) {

        public Unmarked {
            eventId = validEventId(eventId);
            type = type == null ? "" : type;
            payload = payload == null ? new byte[0] : payload.clone();
            headers = headers == null ? Map.of() : Map.copyOf(headers);
            if (attempt < 1) {
                throw new InvalidDeliveryException(
                        "attempt must be 1 or more, but was " + attempt + " for event id '" + eventId + "'");
            }
            source = source == null ? "" : source;
        }

        // Delivery.validEventId's checks, with shorter messages (not run here: every id is valid)
        private static String validEventId(String eventId) {
            if (eventId == null) {
                throw new InvalidDeliveryException("event id must be present, but was null");
            }
            if (eventId.isBlank()) {
                throw new InvalidDeliveryException("event id must not be blank, but was '" + eventId + "'");
            }
            if (eventId.length() > Delivery.MAX_EVENT_ID_LENGTH) {
                throw new InvalidDeliveryException("event id must be at most " + Delivery.MAX_EVENT_ID_LENGTH
                        + " characters, but was " + eventId.length());
            }
            if (eventId.indexOf('\0') >= 0) {
                throw new InvalidDeliveryException("event id must not contain a NUL character");
            }
            int lone = Names.unpairedSurrogate(eventId);
            if (lone >= 0) {
                throw new InvalidDeliveryException(
                        "event id must be well-formed UTF-16, unpaired surrogate at " + lone);
            }
            return eventId;
        }
    }
}
