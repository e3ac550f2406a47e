package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.once.ClaimTiming;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.BeanCreationException;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.support.Acknowledgment;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.MessageBuilder;

/**
 * What a new user gets wrong on the first day, and where they learn of it: an {@code eventId} expression
 * with a typo stops the context start naming the method and the expression (it used to dead-letter every
 * message, with the reason only in the record's headers), and a message without an event id or a delivery
 * that fails in the database is logged at ERROR with the consumer's name. The listener is called through
 * its proxy, as a container calls it; real PostgreSQL.
 */
class ListenerStartupChecksTest {

    /** A deserialized payload, as a JSON deserializer would hand it over. */
    public record Payment(String eventId, long amount) {}

    TestDatabase db;
    ListAppender<ILoggingEvent> logged;
    Logger interceptorLog;

    @BeforeEach
    void start() {
        db = TestPostgres.shared().freshDatabase(4);
        logged = new ListAppender<>();
        logged.start();
        interceptorLog = (Logger) LoggerFactory.getLogger(IdempotentListenerInterceptor.class);
        interceptorLog.addAppender(logged);
    }

    @AfterEach
    void stop() {
        interceptorLog.detachAppender(logged);
        db.close();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class Base {
        static DataSource dataSource;

        @Bean
        DataSource dataSource() {
            return dataSource;
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource ds) {
            return new JdbcTransactionManager(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JdbcTransactionManager tm) {
            return OnceSpring.builder().dataSource(ds).transactionManager(tm).build();
        }
    }

    public static class Typo {
        @IdempotentListener(consumer = "billing", eventId = "#p0.payload.id")
        public void on(Message<Payment> message) {}
    }

    public static class NamedWithoutParameters {
        @IdempotentListener(consumer = "billing", eventId = "#message.payload.eventId")
        public void on(Message<Payment> message) {}
    }

    public static class Fine {
        private int calls;

        /** Through the proxy, from the target (a field read on the class-based proxy would see its own copy). */
        public int calls() {
            return calls;
        }

        @IdempotentListener(consumer = "billing", eventId = "#p0.payload.eventId()")
        public void byPayload(Message<Payment> message) {
            calls++;
        }

        @IdempotentListener(consumer = "billing-headers", eventId = "#p0.headers['once-event-id']")
        public void byHeaderIndex(Message<Payment> message) {}

        @IdempotentListener(consumer = "billing-header")
        public void byHeader(Message<Payment> message) {}
    }

    /** A batch listener over converted payloads: each element's id from eventId, one claim statement per call. */
    public static class Payments {
        private final List<List<String>> calls = new java.util.ArrayList<>();

        @IdempotentListener(consumer = "payments-batch", eventId = "#p0.eventId()")
        public void on(List<Payment> fresh) {
            calls.add(fresh.stream().map(Payment::eventId).toList());
        }

        public List<List<String>> calls() {
            return calls;
        }
    }

    public static class AtCommitBatch {
        @IdempotentListener(consumer = "payments-batch", eventId = "#p0.eventId()", claimTiming = ClaimTiming.AT_COMMIT)
        public void on(List<Payment> fresh) {}
    }

    public static class AtCommitChannel {
        @IdempotentListener(consumer = "manual", claimTiming = ClaimTiming.AT_COMMIT)
        public void on(org.springframework.amqp.core.Message message, com.rabbitmq.client.Channel channel) {}
    }

    public static class AtCommitRecord {
        final List<String> heard = new java.util.concurrent.CopyOnWriteArrayList<>();

        /** Acknowledges every delivery, or asks to see it again; a copy's body runs too with the claim at commit. */
        @IdempotentListener(consumer = "acked", eventId = "#p0", claimTiming = ClaimTiming.AT_COMMIT)
        public void on(String eventId, boolean nack, Acknowledgment ack) {
            if (nack) {
                ack.nack(java.time.Duration.ZERO);
            } else {
                ack.acknowledge();
            }
        }
    }

    /** What the container's acknowledgment heard, in order. */
    static Acknowledgment recording(List<String> heard) {
        return new Acknowledgment() {
            @Override
            public void acknowledge() {
                heard.add("ack");
            }

            @Override
            public void nack(java.time.Duration sleep) {
                heard.add("nack");
            }
        };
    }

    @Test
    void theClaimAtCommitIsRefusedAtTheStartOfABatchListener() {
        assertThatThrownBy(() -> context(AtCommitBatch.class))
                .satisfies(e -> assertThat(messages(e))
                        .contains("@IdempotentListener on AtCommitBatch.on sets claimTiming = AT_COMMIT")
                        .contains("a batch listener"));
    }

    @Test
    void theClaimAtCommitIsRefusedAtTheStartOfAMethodTakingARabbitChannel() {
        assertThatThrownBy(() -> context(AtCommitChannel.class))
                .satisfies(e -> assertThat(messages(e))
                        .contains("@IdempotentListener on AtCommitChannel.on sets claimTiming = AT_COMMIT")
                        .contains("a method taking a RabbitMQ Channel"));
    }

    @Test
    void theClaimAtCommitIsRefusedAtTheStartOnMariaDb() {
        try (TestDatabase maria = dev.once.testsupport.TestMariaDb.shared().freshDatabase(2)) {
            Base.dataSource = maria.dataSource();
            AnnotationConfigApplicationContext c = new AnnotationConfigApplicationContext();
            c.register(Base.class, AtCommitRecord.class);
            assertThatThrownBy(c::refresh)
                    .satisfies(e -> assertThat(messages(e))
                            .contains("claimTiming(AT_COMMIT) cannot be kept")
                            .contains("the dialect mariadb cannot claim at the commit of a joined transaction"));
        }
    }

    /**
     * A copy whose body acknowledged, or asked for redelivery, before its claim found the id taken is
     * acknowledged once it is rolled back: its body's acknowledgement waited for a commit that never came,
     * and a nack would bring back, again and again, a message that is done.
     */
    @Test
    void aCopyFoundAtCommitIsAcknowledgedWhateverItsBodyAsked() {
        try (AnnotationConfigApplicationContext c = context(AtCommitRecord.class)) {
            AtCommitRecord listener = c.getBean(AtCommitRecord.class);
            List<String> heard = new java.util.ArrayList<>();
            listener.on("e-1", false, recording(heard));
            assertThat(heard).as("applied, acknowledged after the commit").containsExactly("ack");
            listener.on("e-1", false, recording(heard));
            assertThat(heard).as("a copy whose body acknowledged").containsExactly("ack", "ack");
            listener.on("e-1", true, recording(heard));
            assertThat(heard).as("a copy whose body nacked").containsExactly("ack", "ack", "ack");
            listener.on("e-2", true, recording(heard));
            assertThat(heard).as("a first delivery's nack stands").containsExactly("ack", "ack", "ack", "nack");
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'acked'"))
                    .isEqualTo(1);
        }
    }

    @Test
    void aBatchListenerOfPayloadsGetsOnlyTheFirstTimeElements() {
        try (AnnotationConfigApplicationContext c = context(Payments.class)) {
            Payments payments = c.getBean(Payments.class);
            Payment p1 = new Payment("pay-1", 20);
            Payment p2 = new Payment("pay-2", 20);
            payments.on(List.of(p1, p2, p1)); // a copy inside the poll
            payments.on(List.of(p2, new Payment("pay-3", 20))); // a copy of an applied one
            assertThat(payments.calls())
                    .as("each event applied exactly once")
                    .containsExactly(List.of("pay-1", "pay-2"), List.of("pay-3"));
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'payments-batch'"))
                    .isEqualTo(3);
        }
    }

    AnnotationConfigApplicationContext context(Class<?> listener) {
        Base.dataSource = db.dataSource();
        AnnotationConfigApplicationContext c = new AnnotationConfigApplicationContext();
        c.register(Base.class, listener);
        c.refresh();
        return c;
    }

    static String messages(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (; t != null; t = t.getCause()) {
            b.append(t.getMessage()).append('\n');
        }
        return b.toString();
    }

    @Test
    void anEventIdTypoStopsTheStartNamingTheMethodAndTheExpression() {
        assertThatThrownBy(() -> context(Typo.class))
                .isInstanceOf(BeanCreationException.class)
                .hasRootCauseInstanceOf(InvalidConfigurationException.class)
                .satisfies(e -> assertThat(messages(e))
                        .contains("@IdempotentListener on Typo.on: eventId '#p0.payload.id' does not fit the method:")
                        .contains(Payment.class.getName() + " has no property 'id'")
                        .contains("eventId()"));
    }

    @Test
    void aParameterNameWithoutParametersMetadataStopsTheStart() {
        // this module is compiled without -parameters, as many builds are: #message would be null at run time
        assertThatThrownBy(() -> context(NamedWithoutParameters.class))
                .satisfies(e -> assertThat(messages(e))
                        .contains("eventId '#message.payload.eventId'")
                        .contains("compiled without -parameters")
                        .contains("#p0"));
    }

    @Test
    void expressionsThatFitStartAndAMissingEventIdIsLoggedAtErrorWithTheConsumer() {
        try (AnnotationConfigApplicationContext c = context(Fine.class)) {
            Fine fine = c.getBean(Fine.class);
            fine.byPayload(MessageBuilder.withPayload(new Payment("pay-1", 20)).build());
            fine.byPayload(MessageBuilder.withPayload(new Payment("pay-1", 20)).build());
            assertThat(fine.calls()).as("effect applied exactly once").isEqualTo(1);

            assertThatThrownBy(() -> fine.byHeader(
                            MessageBuilder.withPayload(new Payment("pay-2", 20)).build()))
                    .isInstanceOf(InvalidDeliveryException.class);
            assertThat(errors())
                    .anySatisfy(line -> assertThat(line)
                            .contains("consumer 'billing-header' cannot take a message")
                            .contains("once-event-id"));
        }
    }

    @Test
    void aDeliveryThatFailsInTheDatabaseIsLoggedAtErrorWithTheConsumer() {
        try (AnnotationConfigApplicationContext c = context(Fine.class)) {
            db.execute("DROP TABLE once_inbox CASCADE"); // the schema went missing under a running application
            Fine fine = c.getBean(Fine.class);
            assertThatThrownBy(() -> fine.byPayload(
                    MessageBuilder.withPayload(new Payment("pay-3", 20)).build()));
            assertThat(errors())
                    .anySatisfy(line -> assertThat(line)
                            .contains("consumer 'billing' failed event 'pay-3'")
                            .contains("once_inbox"));
        }
    }

    List<String> errors() {
        return logged.list.stream()
                .filter(e -> e.getLevel() == Level.ERROR)
                .map(e -> {
                    StringBuilder b = new StringBuilder(e.getFormattedMessage());
                    for (var t = e.getThrowableProxy(); t != null; t = t.getCause()) {
                        b.append(' ').append(t.getMessage());
                    }
                    return b.toString();
                })
                .toList();
    }
}
