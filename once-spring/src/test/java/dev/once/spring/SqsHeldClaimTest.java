package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.config.SqsBootstrapConfiguration;
import io.awspring.cloud.sqs.config.SqsMessageListenerContainerFactory;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;

/**
 * An {@code @SqsListener} receive of an event whose claim another process holds, its transaction open (a call past
 * the visibility timeout, still working): ElasticMQ (a 5 s visibility timeout, a redrive policy moving a message to
 * the dead-letter queue after 2 receives) and real PostgreSQL, the holder an {@link OtherProcessClaim}. Each try of
 * the listener's claim gives up after the lock timeout (IN_PROGRESS); failed each time, the message came back after
 * its visibility timeout, each receive counted, and it was moved to the dead-letter queue while the holder worked:
 * when the holder then rolled back, the event was not applied.
 */
class SqsHeldClaimTest {

    static final String QUEUE = "once-spring-sqs-held-" + UUID.randomUUID();
    static final String CONSUMER = "sqs-held";
    /** The test's bound on each wait: what a CPU-starved run needs, not what a quiet one takes. */
    static final Duration LOADED = Duration.ofMinutes(2);

    static ElasticMqQueues mq;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static String url;
    static String deadLetters;
    // the listener's outcomes, each with the receive it came from
    static HeldClaims held;

    @BeforeAll
    static void start() {
        mq = ElasticMqQueues.start();
        deadLetters = mq.queue(QUEUE + "-dlq", Map.of());
        url = mq.redriven(QUEUE, deadLetters);
        System.setProperty("once.test.sqs.held", QUEUE);
        db = ElasticMqQueues.ledgerDatabase();
        context = ElasticMqQueues.application(db, Config.class, Listener.class);
        held = context.getBean(HeldClaims.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
        if (mq != null) {
            mq.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @Import({SqsBootstrapConfiguration.class, JdbcListenerBeans.class, HeldClaims.class})
    static class Config {
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return mq.containers().build();
        }
    }

    public static class Listener {
        final JdbcTemplate jdbc;

        public Listener(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @SqsListener("${once.test.sqs.held}")
        @IdempotentListener(consumer = CONSUMER)
        public void on(Message<String> message) {
            jdbc.update(
                    "INSERT INTO ledger (event_id) VALUES (?)",
                    message.getHeaders().get("once-event-id"));
        }
    }

    static long ledger(String eventId) {
        return context.getBean(JdbcTemplate.class)
                .queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    /**
     * The listener meets the holder for longer than the redrive policy's receives last (3 visibility timeouts since it
     * first met it: a message left visible is received a third time, and moved, after 2, give or take a poll), or until
     * the message is in the dead-letter queue; the holder then rolls back. Measured in time, not in tries: a message
     * left visible comes back to a second call, whose tries add to the first one's (55 tries of 200 ms were reached
     * after 9 s that way, before the third receive, and the test passed with the visibility never extended). The
     * listener applies an event first: its first call builds the consumer, which may outlast a visibility timeout. The
     * waits are bounded for a CPU-starved run ({@link #LOADED}).
     */
    @Test
    void aMessageWhoseClaimAnotherProcessHoldsOutlastsTheRedrivePolicyAndIsAppliedWhenTheHolderRollsBack()
            throws InterruptedException {
        mq.send(url, null, "s-first", "20");
        await().atMost(LOADED).until(() -> ledger("s-first") == 1);
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "s-held-1");
        mq.send(url, null, "s-held-1", "20");
        await().atMost(LOADED)
                .until(() -> held.metFor("s-held-1").compareTo(ElasticMqQueues.REDRIVEN_VISIBILITY.multipliedBy(3)) > 0
                        || mq.held(deadLetters) > 0);
        assertThat(holder.end(false).status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
        await().atMost(LOADED)
                .untilAsserted(() -> assertThat(ledger("s-held-1"))
                        .as(
                                "event applied exactly once after the holder rolled back, not moved to the dead-letter"
                                        + " queue (the listener's outcomes: %s)",
                                held.heard("s-held-1"))
                        .isEqualTo(1));
        assertThat(mq.held(deadLetters))
                .as(
                        "nothing dead-lettered: the message kept invisible while it waited (the listener's outcomes: %s)",
                        held.heard("s-held-1"))
                .isZero();
        await().atMost(LOADED).until(() -> mq.held(url) == 0);
    }
}
