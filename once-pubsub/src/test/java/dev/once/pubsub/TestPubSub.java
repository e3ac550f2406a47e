package dev.once.pubsub;

import com.google.api.gax.core.CredentialsProvider;
import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.Publisher;
import com.google.cloud.pubsub.v1.SubscriptionAdminClient;
import com.google.cloud.pubsub.v1.SubscriptionAdminSettings;
import com.google.cloud.pubsub.v1.TopicAdminClient;
import com.google.cloud.pubsub.v1.TopicAdminSettings;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.Subscription;
import com.google.pubsub.v1.TopicName;
import dev.once.IdempotentConsumer;
import dev.once.testsupport.TestPubSubEmulator;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * Pub/Sub for tests: Google's emulator ({@link TestPubSubEmulator}), one per JVM; a child JVM is
 * pointed at the parent's through {@value TestPubSubEmulator#HOST_ENV}. Every client here talks
 * plaintext to it without credentials.
 */
final class TestPubSub {

    static final String PROJECT = "once-test";
    static final CredentialsProvider NO_CREDENTIALS = NoCredentialsProvider.create();

    private static ManagedChannel channel;
    private static TopicAdminClient topics;
    private static SubscriptionAdminClient subscriptions;

    private TestPubSub() {}

    static String host() {
        return TestPubSubEmulator.host();
    }

    /** A channel of its own, for a client a test cuts by closing it. */
    record OwnChannel(ManagedChannel channel, TransportChannelProvider provider) {
        void cut() {
            channel.shutdownNow();
        }
    }

    /**
     * Gives every streaming pull on a channel a 5 s deadline (the client opens the next one). The emulator never
     * learns that a stream died with its channel (its gRPC server fails with a NoSuchMethodError on the
     * cancellation), so a cut consumer's stream lives on in it and keeps taking the subscription's messages, each
     * back only after its ack deadline and then as likely to go to a dead stream again: the contract's restarts
     * took 50 s. With a deadline the emulator ends a dead stream itself within 5 s.
     */
    static final ClientInterceptor STREAMS_END_WITHIN_5_S = new ClientInterceptor() {
        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return next.newCall(
                    method,
                    method.getFullMethodName().equals("google.pubsub.v1.Subscriber/StreamingPull")
                            ? options.withDeadlineAfter(5, TimeUnit.SECONDS)
                            : options);
        }
    };

    static OwnChannel newChannel(String hostPort) {
        ManagedChannel c = ManagedChannelBuilder.forTarget(hostPort)
                .usePlaintext()
                .intercept(STREAMS_END_WITHIN_5_S)
                .build();
        return new OwnChannel(c, FixedTransportChannelProvider.create(GrpcTransportChannel.create(c)));
    }

    static synchronized TransportChannelProvider channelProvider() {
        if (channel == null) {
            channel = ManagedChannelBuilder.forTarget(host()).usePlaintext().build();
            Runtime.getRuntime().addShutdownHook(new Thread(channel::shutdownNow, "once-pubsub-test-channel"));
        }
        return FixedTransportChannelProvider.create(GrpcTransportChannel.create(channel));
    }

    static synchronized TopicAdminClient topics() {
        if (topics == null) {
            try {
                topics = TopicAdminClient.create(TopicAdminSettings.newBuilder()
                        .setTransportChannelProvider(channelProvider())
                        .setCredentialsProvider(NO_CREDENTIALS)
                        .build());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return topics;
    }

    static synchronized SubscriptionAdminClient subscriptions() {
        if (subscriptions == null) {
            try {
                subscriptions = SubscriptionAdminClient.create(SubscriptionAdminSettings.newBuilder()
                        .setTransportChannelProvider(channelProvider())
                        .setCredentialsProvider(NO_CREDENTIALS)
                        .build());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return subscriptions;
    }

    static TopicName topic(String id) {
        TopicName t = TopicName.of(PROJECT, id);
        topics().createTopic(t);
        return t;
    }

    /** A subscription {@code id} on {@code topic}, 10 s ack deadline, shaped further by {@code config}. */
    static ProjectSubscriptionName subscription(
            TopicName topic, String id, UnaryOperator<Subscription.Builder> config) {
        ProjectSubscriptionName s = ProjectSubscriptionName.of(PROJECT, id);
        subscriptions()
                .createSubscription(config.apply(Subscription.newBuilder()
                                .setName(s.toString())
                                .setTopic(topic.toString())
                                .setAckDeadlineSeconds(10))
                        .build());
        return s;
    }

    static void delete(TopicName topic, ProjectSubscriptionName... subs) {
        for (ProjectSubscriptionName s : subs) {
            subscriptions().deleteSubscription(s);
        }
        topics().deleteTopic(topic);
    }

    static Publisher publisher(TopicName topic, boolean ordered) {
        try {
            return Publisher.newBuilder(topic)
                    .setChannelProvider(channelProvider())
                    .setCredentialsProvider(NO_CREDENTIALS)
                    .setEnableMessageOrdering(ordered)
                    .build();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static PubSubPublisher outboxPublisher() {
        return PubSubPublisher.builder()
                .project(PROJECT)
                .channelProvider(channelProvider())
                .credentialsProvider(NO_CREDENTIALS)
                .build();
    }

    /** A consumer builder on {@code subscription} through the emulator, on its own channel when {@code own} is given. */
    static PubSubConsumer.Builder consumer(
            ProjectSubscriptionName subscription, IdempotentConsumer consumer, TransportChannelProvider own) {
        return PubSubConsumer.builder()
                .subscription(subscription.getProject(), subscription.getSubscription())
                .consumer(consumer)
                .channelProvider(own == null ? channelProvider() : own)
                .credentialsProvider(NO_CREDENTIALS);
    }

    /** What a child JVM needs to reach the same emulator. */
    static Map<String, String> childEnvironment() {
        return Map.of(TestPubSubEmulator.HOST_ENV, host());
    }
}
