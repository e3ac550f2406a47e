package dev.once.spring;

import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.cloud.pubsub.v1.SubscriptionAdminClient;
import com.google.cloud.pubsub.v1.SubscriptionAdminSettings;
import com.google.cloud.pubsub.v1.TopicAdminClient;
import com.google.cloud.pubsub.v1.TopicAdminSettings;
import com.google.cloud.spring.pubsub.core.PubSubConfiguration;
import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.support.DefaultPublisherFactory;
import com.google.cloud.spring.pubsub.support.DefaultSubscriberFactory;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.Subscription;
import com.google.pubsub.v1.TopicName;
import dev.once.testsupport.TestPubSubEmulator;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.io.IOException;

/**
 * Google's Pub/Sub emulator as once-spring's Pub/Sub tests reach it: one plaintext channel (through the test's own
 * interceptors), the topic and subscription admin clients on it, and the Spring Cloud GCP beans its
 * auto-configuration builds for the emulator. A test class holds one and closes it after its last test.
 */
final class PubSubTestBeans implements AutoCloseable {

    static final String PROJECT = "once-test";

    final ManagedChannel channel;
    final TopicAdminClient topics;
    final SubscriptionAdminClient subscriptions;

    PubSubTestBeans(ClientInterceptor... interceptors) {
        channel = ManagedChannelBuilder.forTarget(TestPubSubEmulator.host())
                .usePlaintext()
                .intercept(interceptors)
                .build();
        try {
            topics = TopicAdminClient.create(TopicAdminSettings.newBuilder()
                    .setTransportChannelProvider(provider(channel))
                    .setCredentialsProvider(NoCredentialsProvider.create())
                    .build());
            subscriptions = SubscriptionAdminClient.create(SubscriptionAdminSettings.newBuilder()
                    .setTransportChannelProvider(provider(channel))
                    .setCredentialsProvider(NoCredentialsProvider.create())
                    .build());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static FixedTransportChannelProvider provider(ManagedChannel c) {
        return FixedTransportChannelProvider.create(GrpcTransportChannel.create(c));
    }

    /** A subscriber factory on {@code c}, as Spring Cloud GCP's auto-configuration builds one for the emulator. */
    static DefaultSubscriberFactory subscriberFactory(ManagedChannel c) {
        PubSubConfiguration config = new PubSubConfiguration();
        config.initialize(PROJECT);
        DefaultSubscriberFactory f = new DefaultSubscriberFactory(() -> PROJECT, config);
        f.setChannelProvider(provider(c));
        f.setCredentialsProvider(NoCredentialsProvider.create());
        return f;
    }

    /** A template publishing on {@code c} and pulling through {@code subscribers}. */
    static PubSubTemplate template(ManagedChannel c, DefaultSubscriberFactory subscribers) {
        DefaultPublisherFactory publishers = new DefaultPublisherFactory(() -> PROJECT);
        publishers.setChannelProvider(provider(c));
        publishers.setCredentialsProvider(NoCredentialsProvider.create());
        return new PubSubTemplate(publishers, subscribers);
    }

    /** A template on this channel, for the application context's {@code PubSubTemplate} bean. */
    PubSubTemplate template() {
        return template(channel, subscriberFactory(channel));
    }

    /**
     * Creates {@code topic} and its {@code subscription}, with Pub/Sub's shortest ack deadline (10 s): a message left
     * unsettled comes back after 10 s at the earliest.
     */
    void create(String topic, String subscription) {
        topics.createTopic(TopicName.of(PROJECT, topic));
        subscriptions.createSubscription(Subscription.newBuilder()
                .setName(ProjectSubscriptionName.of(PROJECT, subscription).toString())
                .setTopic(TopicName.of(PROJECT, topic).toString())
                .setAckDeadlineSeconds(10)
                .build());
    }

    /**
     * Creates {@code topic} and its {@code subscription} as {@link #create} does, with a dead-letter policy: a message
     * past {@code maxDeliveryAttempts} attempts goes to {@code deadLetterTopic}.
     */
    void createDeadLettering(String topic, String subscription, String deadLetterTopic, int maxDeliveryAttempts) {
        topics.createTopic(TopicName.of(PROJECT, topic));
        subscriptions.createSubscription(Subscription.newBuilder()
                .setName(ProjectSubscriptionName.of(PROJECT, subscription).toString())
                .setTopic(TopicName.of(PROJECT, topic).toString())
                .setAckDeadlineSeconds(10)
                .setDeadLetterPolicy(com.google.pubsub.v1.DeadLetterPolicy.newBuilder()
                        .setDeadLetterTopic(
                                TopicName.of(PROJECT, deadLetterTopic).toString())
                        .setMaxDeliveryAttempts(maxDeliveryAttempts))
                .build());
    }

    void delete(String topic, String subscription) {
        subscriptions.deleteSubscription(ProjectSubscriptionName.of(PROJECT, subscription));
        topics.deleteTopic(TopicName.of(PROJECT, topic));
    }

    @Override
    public void close() {
        subscriptions.close();
        topics.close();
        channel.shutdownNow();
    }
}
