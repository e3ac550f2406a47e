package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.handler.DefaultTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingReceiverTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingSenderTracingObservationHandler;
import io.micrometer.tracing.otel.bridge.EventPublishingContextWrapper;
import io.micrometer.tracing.otel.bridge.OtelCurrentTraceContext;
import io.micrometer.tracing.otel.bridge.OtelPropagator;
import io.micrometer.tracing.otel.bridge.OtelTracer;
import io.micrometer.tracing.otel.bridge.Slf4JEventListener;
import io.micrometer.tracing.propagation.Propagator;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.ContextStorage;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.slf4j.MDC;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ContainerProperties.AckMode;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A trace through the outbox, on the OpenTelemetry SDK behind Micrometer Tracing, real Kafka and
 * PostgreSQL: a request adds a row; the relay sends it in a span that links to the request rather
 * than descending from it; the {@code @IdempotentListener} consumer continues the request's trace
 * from the {@code traceparent} header, with the trace id in the MDC beside {@code once.consumer}.
 */
class OutboxTracingTest {

    // What Spring Boot's tracing auto-configuration does: scope changes update the MDC. Registered
    // before anything touches OpenTelemetry's context storage, which reads its wrappers once.
    static final Slf4JEventListener MDC_LISTENER = new Slf4JEventListener();

    static {
        ContextStorage.addWrapper(new EventPublishingContextWrapper(MDC_LISTENER::onEvent));
    }

    static final InMemorySpanExporter SPANS = InMemorySpanExporter.create();
    static final SdkTracerProvider PROVIDER = SdkTracerProvider.builder()
            .addSpanProcessor(SimpleSpanProcessor.create(SPANS))
            .build();
    static final io.opentelemetry.api.trace.Tracer OTEL = PROVIDER.get("once-test");
    static final OtelTracer TRACER = new OtelTracer(OTEL, new OtelCurrentTraceContext(), MDC_LISTENER::onEvent);
    static final Propagator PROPAGATOR =
            new OtelPropagator(ContextPropagators.create(W3CTraceContextPropagator.getInstance()), OTEL);

    /** What the consumer saw (static: the listener bean is a proxy). */
    static final List<Seen> SEEN = new CopyOnWriteArrayList<>();

    public static String ORDERS;
    public static String RECEIPTS;
    static TestKafka kafka;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;

    @BeforeAll
    static void start() {
        kafka = TestKafka.shared();
        ORDERS = kafka.createTopic("traced-orders", 1);
        RECEIPTS = kafka.createTopic("traced-receipts", 1);
        db = TestPostgres.shared().freshDatabase(4);
        context = new AnnotationConfigApplicationContext(Config.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableKafka
    @EnableIdempotentListeners
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource ds) {
            return new JdbcTransactionManager(ds);
        }

        @Bean
        OnceTracing onceTracing() {
            return OnceTracing.of(TRACER, PROPAGATOR);
        }

        @Bean
        OnceSpring once(DataSource ds, JdbcTransactionManager tm, OnceTracing tracing) {
            return OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .outboxHeaders(tracing.outboxHeaders())
                    .build();
        }

        @Bean
        OnceOutbox outbox(OnceSpring once) {
            return once.outbox();
        }

        /** The container finds it and, with observation enabled, opens a receive span from the record's headers. */
        @Bean
        ObservationRegistry observationRegistry() {
            ObservationRegistry registry = ObservationRegistry.create();
            registry.observationConfig()
                    .observationHandler(new ObservationHandler.FirstMatchingCompositeObservationHandler(
                            new PropagatingSenderTracingObservationHandler<>(TRACER, PROPAGATOR),
                            new PropagatingReceiverTracingObservationHandler<>(TRACER, PROPAGATOR),
                            new DefaultTracingObservationHandler(TRACER)));
            return registry;
        }

        @Bean
        KafkaTemplate<String, String> kafkaTemplate() {
            return new KafkaTemplate<>(TestBeans.stringProducers(kafka));
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> kafkaListenerContainerFactory() {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(TestBeans.stringConsumers(kafka, Map.of()));
            f.getContainerProperties().setAckMode(AckMode.RECORD);
            f.getContainerProperties().setObservationEnabled(true);
            return f;
        }

        @Bean
        Receipts receipts(OnceOutbox outbox) {
            return new Receipts(outbox);
        }
    }

    /** What the consumer saw while its body ran. */
    record Seen(String traceId, String parentSpanId, String spanId, String mdcTraceId, String mdcConsumer) {}

    public static class Receipts {
        final OnceOutbox outbox;

        Receipts(OnceOutbox outbox) {
            this.outbox = outbox;
        }

        @KafkaListener(id = "traced-receipts", topics = "#{T(dev.once.spring.OutboxTracingTest).ORDERS}")
        @IdempotentListener(consumer = "receipts")
        public void onOrder(ConsumerRecord<String, String> record) throws Exception {
            Span span = TRACER.currentSpan();
            SEEN.add(new Seen(
                    span.context().traceId(),
                    span.context().parentId(),
                    span.context().spanId(),
                    MDC.get("traceId"),
                    MDC.get("once.consumer")));
            outbox.add(RECEIPTS, record.key(), record.value().getBytes(StandardCharsets.UTF_8), Map.of(), null);
        }
    }

    static String header(String eventIdLike, String name) {
        return new JdbcTemplate(db.dataSource())
                        .queryForList(
                                "SELECT headers FROM once_outbox WHERE event_id LIKE ?", String.class, eventIdLike)
                        .stream()
                        .flatMap(h -> java.util.Arrays.stream(h.split("&")))
                        .filter(kv -> kv.startsWith(name + "="))
                        .map(kv -> java.net.URLDecoder.decode(kv.substring(name.length() + 1), StandardCharsets.UTF_8))
                        .findFirst()
                        .orElse(null);
    }

    @Test
    void theRowKeepsTheRequestsContextTheSendSpanLinksToItAndTheConsumerContinuesIt() {
        OnceSpring once = context.getBean(OnceSpring.class);
        OnceOutbox outbox = context.getBean(OnceOutbox.class);
        Span request = TRACER.nextSpan().name("POST /orders").start();
        try (Tracer.SpanInScope scope = TRACER.withSpan(request)) {
            new TransactionTemplate(once.transactionManager()).executeWithoutResult(status -> {
                try {
                    outbox.add(ORDERS, "o-1", "order o-1".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
        } finally {
            request.end();
        }
        String requestTraceparent =
                "00-" + request.context().traceId() + "-" + request.context().spanId() + "-01";
        assertThat(header("spring:%", "traceparent"))
                .as("the request's context is stored with the row at add time")
                .isEqualTo(requestTraceparent);

        @SuppressWarnings("unchecked")
        KafkaTemplate<String, String> template = context.getBean(KafkaTemplate.class);
        Publisher kafkaPublisher = m -> {
            ProducerRecord<String, String> r =
                    new ProducerRecord<>(m.destination(), m.key(), new String(m.payload(), StandardCharsets.UTF_8));
            m.headers().forEach((k, v) -> r.headers().add(k, v.getBytes(StandardCharsets.UTF_8)));
            template.send(r).get(30, TimeUnit.SECONDS);
            return Receipt.NONE;
        };
        OnceTracing tracing = context.getBean(OnceTracing.class);
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .publisher(tracing.publisher(kafkaPublisher))
                .build()) {
            // a drain woken by some other request must still not descend from it
            Span waker = TRACER.nextSpan().name("some other request").start();
            try (Tracer.SpanInScope scope = TRACER.withSpan(waker)) {
                assertThat(relay.relayOnce()).isEqualTo(1);
            } finally {
                waker.end();
            }

            SpanData send = SPANS.getFinishedSpanItems().stream()
                    .filter(s -> s.getName().equals(OnceTracing.SEND_SPAN))
                    .findFirst()
                    .orElseThrow();
            assertThat(send.getParentSpanContext().isValid())
                    .as("the send span is a root, not the child of the request or of whoever woke the drain")
                    .isFalse();
            assertThat(send.getLinks()).singleElement().satisfies(link -> {
                assertThat(link.getSpanContext().getTraceId())
                        .isEqualTo(request.context().traceId());
                assertThat(link.getSpanContext().getSpanId())
                        .isEqualTo(request.context().spanId());
            });

            await().atMost(Duration.ofSeconds(30)).until(() -> !SEEN.isEmpty());
            Seen seen = SEEN.get(0);
            assertThat(seen.traceId())
                    .as("the consumer continues the request's trace")
                    .isEqualTo(request.context().traceId());
            assertThat(seen.parentSpanId())
                    .as("its receive span's parent is the request's span, from the traceparent header")
                    .isEqualTo(request.context().spanId());
            assertThat(seen.mdcTraceId())
                    .as("MDC: trace id")
                    .isEqualTo(request.context().traceId());
            assertThat(seen.mdcConsumer()).as("MDC: once.consumer beside it").isEqualTo("receipts");

            await().atMost(Duration.ofSeconds(30)).until(() -> header("receipts:%", "traceparent") != null);
            assertThat(header("receipts:%", "traceparent"))
                    .as("a listener's row keeps the consumer's context")
                    .isEqualTo("00-" + request.context().traceId() + "-" + seen.spanId() + "-01");
        }
    }
}
