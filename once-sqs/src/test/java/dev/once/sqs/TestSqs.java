package dev.once.sqs;

import dev.once.outbox.OutboxMessage;
import dev.once.testsupport.Services;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * SQS for tests: the endpoint named by {@value #ENDPOINT_ENV}, or ElasticMQ started in-process
 * once per JVM. A child JVM is given the parent's endpoint through the same variable.
 */
final class TestSqs {

    static final String ENDPOINT_ENV = "ONCE_TEST_SQS_ENDPOINT";

    private static SqsClient client;
    private static String endpoint;
    private static AwsCredentialsProvider credentials;

    private TestSqs() {}

    static synchronized SqsClient client() {
        if (client == null) {
            endpoint = System.getenv(ENDPOINT_ENV);
            AwsCredentialsProvider credentials = StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x"));
            if (endpoint == null || endpoint.isBlank()) {
                try {
                    SQSRestServer server = SQSRestServerBuilder.withInterface("127.0.0.1")
                            .withDynamicPort()
                            .start();
                    int port = server.waitUntilStarted().localAddress().getPort();
                    endpoint = "http://127.0.0.1:" + port;
                    Runtime.getRuntime().addShutdownHook(new Thread(server::stopAndWait, "elasticmq-stop"));
                } catch (RuntimeException e) {
                    throw Services.unavailable("sqs", "set " + ENDPOINT_ENV + " to an SQS endpoint", e);
                }
            } else if (System.getenv("AWS_ACCESS_KEY_ID") != null) {
                credentials = DefaultCredentialsProvider.builder().build();
            }
            TestSqs.credentials = credentials;
            client = newClient();
        }
        return client;
    }

    /** A client of its own, for a consumer whose connections a test cuts by closing it. */
    static synchronized SqsClient newClient() {
        if (credentials == null) {
            client();
        }
        return SqsClient.builder()
                .endpointOverride(URI.create(endpoint))
                .region(Region.of(System.getenv().getOrDefault("AWS_REGION", "us-east-1")))
                .credentialsProvider(credentials)
                .build();
    }

    /** What a child JVM needs to reach the same SQS. */
    static Map<String, String> childEnvironment() {
        client();
        return Map.of(ENDPOINT_ENV, endpoint);
    }

    /** Creates a queue; a name ending in {@code .fifo} makes a FIFO queue. */
    static String createQueue(String name, int visibilityTimeoutSeconds) {
        return createQueue(name, visibilityTimeoutSeconds, null);
    }

    /** As {@link #createQueue(String, int)}, with a redrive policy (JSON) unless it is null. */
    static String createQueue(String name, int visibilityTimeoutSeconds, String redrivePolicy) {
        Map<QueueAttributeName, String> attributes = new HashMap<>();
        attributes.put(QueueAttributeName.VISIBILITY_TIMEOUT, Integer.toString(visibilityTimeoutSeconds));
        if (redrivePolicy != null) {
            attributes.put(QueueAttributeName.REDRIVE_POLICY, redrivePolicy);
        }
        if (name.endsWith(".fifo")) {
            attributes.put(QueueAttributeName.FIFO_QUEUE, "true");
        }
        return client().createQueue(r -> r.queueName(name).attributes(attributes))
                .queueUrl();
    }

    /** A message as the outbox relay would hand it to the publisher: the event id is also its idempotency key. */
    static OutboxMessage message(String destination, String eventId, String key, String body) {
        return new OutboxMessage(
                0, eventId, destination, key, body.getBytes(StandardCharsets.UTF_8), Map.of(), eventId, 0, null);
    }

    /** Messages the queue holds, visible ones (none may be in flight when this is asked). */
    static long messagesStored(String queueUrl) {
        return Long.parseLong(client().getQueueAttributes(
                        r -> r.queueUrl(queueUrl).attributeNames(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES))
                .attributes()
                .get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES));
    }

    static void deleteQueue(String url) {
        client().deleteQueue(r -> r.queueUrl(url));
    }
}
