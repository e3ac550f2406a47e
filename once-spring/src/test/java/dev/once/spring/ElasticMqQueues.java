package dev.once.spring;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.awspring.cloud.sqs.config.SqsMessageListenerContainerFactory;
import java.net.URI;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * An in-process ElasticMQ and an async client on it, for once-spring's tests of {@code @SqsListener} methods run by
 * real Spring Cloud AWS containers ({@link SqsIdempotentListenerTest}, {@link SqsFifoIdempotentListenerTest}): its
 * queues, messages carrying the {@code once-event-id} attribute, how many a queue holds; and the test's database with
 * its {@code ledger}, and an application on it.
 */
final class ElasticMqQueues implements AutoCloseable {

    final SQSRestServer server;
    final SqsAsyncClient sqs;

    private ElasticMqQueues(SQSRestServer server, SqsAsyncClient sqs) {
        this.server = server;
        this.sqs = sqs;
    }

    static ElasticMqQueues start() {
        SQSRestServer server = SQSRestServerBuilder.withInterface("127.0.0.1")
                .withDynamicPort()
                .start();
        int port = server.waitUntilStarted().localAddress().getPort();
        SqsAsyncClient sqs = SqsAsyncClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build();
        return new ElasticMqQueues(server, sqs);
    }

    /** Creates the standard queue {@code name}: its URL. */
    String queue(String name, Map<QueueAttributeName, String> attributes) {
        return sqs.createQueue(r -> r.queueName(name).attributes(attributes))
                .join()
                .queueUrl();
    }

    /** How long a message of a {@link #redriven} queue is invisible after each receive. */
    static final Duration REDRIVEN_VISIBILITY = Duration.ofSeconds(5);

    /**
     * Creates the standard queue {@code name} for a listener that meets a held claim: a message is invisible for 5 s
     * after each receive, and moved to the queue at the URL {@code deadLetters} at its third receive. Its URL.
     */
    String redriven(String name, String deadLetters) {
        return queue(
                name,
                Map.of(
                        QueueAttributeName.VISIBILITY_TIMEOUT,
                        Long.toString(REDRIVEN_VISIBILITY.toSeconds()),
                        QueueAttributeName.REDRIVE_POLICY,
                        "{\"deadLetterTargetArn\":\"" + arn(deadLetters) + "\",\"maxReceiveCount\":\"2\"}"));
    }

    /** The listener containers' factory on these queues: a poll each second, each acknowledgement sent at once. */
    SqsMessageListenerContainerFactory.Builder<Object> containers() {
        return SqsMessageListenerContainerFactory.builder()
                .sqsAsyncClient(sqs)
                .configure(o -> o.pollTimeout(Duration.ofSeconds(1))
                        .maxDelayBetweenPolls(Duration.ofSeconds(1))
                        .acknowledgementInterval(Duration.ZERO)
                        .acknowledgementThreshold(0));
    }

    /** Creates the FIFO queue {@code name} (ending in {@code .fifo}): its URL. */
    String fifo(String name, Map<QueueAttributeName, String> attributes) {
        Map<QueueAttributeName, String> all = new HashMap<>(attributes);
        all.put(QueueAttributeName.FIFO_QUEUE, "true");
        return queue(name, all);
    }

    /** The ARN of the queue at {@code url}, for a redrive policy. */
    String arn(String url) {
        return sqs.getQueueAttributes(r -> r.queueUrl(url).attributeNames(QueueAttributeName.QUEUE_ARN))
                .join()
                .attributes()
                .get(QueueAttributeName.QUEUE_ARN);
    }

    /**
     * Sends {@code body} with the {@code once-event-id} attribute {@code eventId}; to a FIFO queue where {@code group}
     * is not null, deduplicated by the event id.
     */
    void send(String url, String group, String eventId, String body) {
        sqs.sendMessage(r -> {
                    r.queueUrl(url)
                            .messageBody(body)
                            .messageAttributes(Map.of(
                                    "once-event-id",
                                    MessageAttributeValue.builder()
                                            .dataType("String")
                                            .stringValue(eventId)
                                            .build()));
                    if (group != null) {
                        r.messageGroupId(group).messageDeduplicationId(eventId);
                    }
                })
                .join();
    }

    /** Messages in the queue at {@code url}, visible or in flight. */
    long held(String url) {
        Map<QueueAttributeName, String> a = sqs.getQueueAttributes(r -> r.queueUrl(url)
                        .attributeNames(
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE))
                .join()
                .attributes();
        return Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES))
                + Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
    }

    /** A fresh database of the shared PostgreSQL with the listeners' {@code ledger}: their effects, in order. */
    static TestDatabase ledgerDatabase() {
        TestDatabase db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (seq bigserial PRIMARY KEY, event_id text NOT NULL)");
        return db;
    }

    /** An application of {@code config} on {@code db}, which its close leaves open (for another and the test). */
    static AnnotationConfigApplicationContext application(TestDatabase db, Class<?>... config) {
        AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
        context.registerBean(DataSource.class, db::dataSource, d -> d.setDestroyMethodName(""));
        context.register(config);
        context.refresh();
        return context;
    }

    @Override
    public void close() {
        sqs.close();
        server.stopAndWait();
    }
}
