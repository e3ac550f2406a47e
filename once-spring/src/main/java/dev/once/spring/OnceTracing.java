package dev.once.spring;

import dev.once.OutboxHeaders;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import io.micrometer.tracing.Link;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.TraceContext;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Tracing through the outbox with Micrometer Tracing (its OpenTelemetry or Brave bridge): the trace
 * context current when a row is added is stored with the row ({@link #outboxHeaders()}, W3C
 * {@code traceparent} and {@code tracestate} with the usual propagator), travels in the headers the
 * relay sends, and the consumer continues that trace. The relay's send span ({@link #publisher})
 * starts a trace of its own and <em>links</em> to the stored context: a drain sends rows of many
 * requests, and none of them is its parent.
 *
 * <p>Immutable and thread-safe.
 */
public final class OnceTracing {

    /** The W3C trace context header the send span links to. */
    public static final String TRACEPARENT = "traceparent";

    /** The name of the relay's send span. */
    public static final String SEND_SPAN = "once.outbox send";

    // version 00: trace id, parent span id, flags (https://www.w3.org/TR/trace-context/#traceparent-header)
    private static final Pattern W3C = Pattern.compile("[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})");

    private final Tracer tracer;
    private final Propagator propagator;

    private OnceTracing(Tracer tracer, Propagator propagator) {
        this.tracer = tracer;
        this.propagator = propagator;
    }

    /**
     * Tracing on the application's tracer and propagator (the beans Spring Boot's tracing defines).
     * Micrometer Tracing is optional ({@code requires static}): an application that calls this has it.
     */
    @SuppressWarnings("exports")
    public static OnceTracing of(Tracer tracer, Propagator propagator) {
        return new OnceTracing(
                Objects.requireNonNull(tracer, "tracer"), Objects.requireNonNull(propagator, "propagator"));
    }

    /**
     * The headers that store the caller's current trace context with each outbox row: what the
     * propagator injects ({@code traceparent}, {@code tracestate} when there is one), nothing outside
     * a trace. {@link OnceSpring.Builder#outboxHeaders} takes it.
     */
    public OutboxHeaders outboxHeaders() {
        return () -> {
            TraceContext current = tracer.currentTraceContext().context();
            if (current == null) {
                return Map.of();
            }
            Map<String, String> headers = new LinkedHashMap<>();
            propagator.inject(current, headers, Map::put);
            return headers;
        };
    }

    /**
     * {@code delegate} with a producer span around each send: a new trace, linked to the context
     * stored with the row (none for a row added outside a trace), tagged with the row's event id and
     * destination. The message itself goes out unchanged, with the stored {@code traceparent}, so the
     * consumer's span is a child of the request that added the row, not of the relay.
     */
    public Publisher publisher(Publisher delegate) {
        Objects.requireNonNull(delegate, "delegate");
        return new Publisher() {
            @Override
            public Receipt publish(OutboxMessage message) throws Exception {
                Span span = sendSpan(message);
                try (Tracer.SpanInScope scope = tracer.withSpan(span)) {
                    return delegate.publish(message);
                } catch (Exception | Error e) {
                    span.error(e);
                    throw e;
                } finally {
                    span.end();
                }
            }

            /** Keeps the delegate's batch concurrent: one span per message, ended when its send completes. */
            @Override
            public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                List<Span> spans = messages.stream().map(m -> sendSpan(m)).toList();
                List<CompletionStage<Receipt>> stages;
                try {
                    stages = delegate.publishAll(messages);
                } catch (RuntimeException | Error e) {
                    spans.forEach(span -> span.error(e).end());
                    throw e;
                }
                for (int i = 0; i < stages.size() && i < spans.size(); i++) {
                    Span span = spans.get(i);
                    stages.get(i).whenComplete((receipt, failure) -> {
                        if (failure != null) {
                            span.error(failure);
                        }
                        span.end();
                    });
                }
                return stages;
            }
        };
    }

    private Span sendSpan(OutboxMessage message) {
        Span.Builder builder = tracer.spanBuilder()
                .setNoParent()
                .name(SEND_SPAN)
                .kind(Span.Kind.PRODUCER)
                .tag("messaging.destination.name", message.destination())
                .tag("once.event_id", message.eventId());
        TraceContext origin = origin(message);
        if (origin != null) {
            builder.addLink(new Link(origin));
        }
        return builder.start();
    }

    /** The context the row was added in, from its stored {@code traceparent}; null when absent or malformed. */
    private TraceContext origin(OutboxMessage message) {
        String traceparent = message.headers().get(TRACEPARENT);
        if (traceparent == null) {
            return null;
        }
        Matcher m = W3C.matcher(traceparent);
        if (!m.matches()) {
            return null;
        }
        return tracer.traceContextBuilder()
                .traceId(m.group(1))
                .spanId(m.group(2))
                .sampled((Integer.parseInt(m.group(3), 16) & 1) == 1)
                .build();
    }
}
