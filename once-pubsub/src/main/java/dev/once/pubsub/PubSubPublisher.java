package dev.once.pubsub;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutureCallback;
import com.google.api.core.ApiFutures;
import com.google.api.gax.batching.BatchingSettings;
import com.google.api.gax.core.CredentialsProvider;
import com.google.api.gax.rpc.ApiException;
import com.google.api.gax.rpc.InvalidArgumentException;
import com.google.api.gax.rpc.NotFoundException;
import com.google.api.gax.rpc.PermissionDeniedException;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.Publisher;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.TopicName;
import dev.once.InvalidConfigurationException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The outbox {@link dev.once.outbox.Publisher} for Pub/Sub: publishes a row to the topic its
 * destination names (a topic id in the configured project, or {@code projects/P/topics/T}), with
 * every row header as an attribute and the event id as {@value PubSubMessages#EVENT_ID_ATTRIBUTE},
 * where {@link PubSubConsumer} reads it. The row's key is the message's ordering key, so a
 * subscription with message ordering delivers one key's rows in outbox order.
 *
 * <pre>{@code
 * PubSubPublisher pubsub = PubSubPublisher.builder().project("my-project").build();
 * OutboxRelay relay = OutboxRelay.builder().dataSource(ds).publisher(pubsub).build();
 * }</pre>
 *
 * <p><b>Batches.</b> {@link #publishAll} hands every row to the client's publisher (one per topic,
 * kept open, with message ordering on) and flushes: the client batches them into few requests and
 * each row's stage completes with the server's answer for it.
 *
 * <p><b>Deduplication.</b> Pub/Sub has none on publish: a relay that re-sends after a crash makes
 * a second message with the same event id, which the consumer's inbox absorbs.
 *
 * <p><b>Receipt.</b> Status 0; body {@code topic=<name> messageId=<id>}.
 *
 * <p><b>Failure contract.</b> Permanent: the topic does not exist, the message is invalid (too
 * large, a bad attribute) or publishing is not permitted. Retryable: everything else (unavailable,
 * deadline exceeded). After a failed publish with an ordering key the client refuses that key until
 * it is resumed; this publisher resumes it, so the relay's retry goes through.
 *
 * <p>Thread-safe. {@link #close()} flushes and shuts down the client publishers.
 */
public final class PubSubPublisher implements dev.once.outbox.Publisher, AutoCloseable {

    private final String project;
    private final TransportChannelProvider channelProvider;
    private final CredentialsProvider credentialsProvider;
    private final BatchingSettings batching;
    private final Map<TopicName, Publisher> publishers = new ConcurrentHashMap<>();

    private PubSubPublisher(Builder b) {
        this.project = b.project;
        this.channelProvider = b.channelProvider;
        this.credentialsProvider = b.credentialsProvider;
        this.batching = b.batching;
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Publishes one row and waits for the server's message id.
     *
     * @throws PublishFailure permanent for a missing topic, an invalid message or a denied publish;
     *                        retryable otherwise
     */
    @Override
    public Receipt publish(OutboxMessage message) throws Exception {
        try {
            return publishAll(List.of(message)).get(0).toCompletableFuture().get(2, TimeUnit.MINUTES);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }

    /** Hands every row to the client's batching publisher, flushes, and returns one stage per row. */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        Set<Publisher> touched = new LinkedHashSet<>();
        for (OutboxMessage m : messages) {
            CompletableFuture<Receipt> result = new CompletableFuture<>();
            results.add(result);
            Publisher publisher;
            try {
                publisher = publisher(m);
            } catch (RuntimeException e) {
                result.completeExceptionally(failure(m, e));
                continue;
            }
            touched.add(publisher);
            ApiFuture<String> id;
            try {
                id = publisher.publish(message(m));
            } catch (RuntimeException e) {
                result.completeExceptionally(failure(m, e));
                continue;
            }
            ApiFutures.addCallback(
                    id,
                    new ApiFutureCallback<>() {
                        @Override
                        public void onSuccess(String messageId) {
                            result.complete(new Receipt(
                                    0, "topic=" + publisher.getTopicNameString() + " messageId=" + messageId));
                        }

                        @Override
                        public void onFailure(Throwable t) {
                            if (m.key() != null) {
                                // the client holds the key back after a failure; the relay retries the row
                                publisher.resumePublish(m.key());
                            }
                            result.completeExceptionally(failure(m, t));
                        }
                    },
                    MoreExecutors.directExecutor());
        }
        touched.forEach(Publisher::publishAllOutstanding);
        return results;
    }

    private static PubsubMessage message(OutboxMessage m) {
        PubsubMessage.Builder b = PubsubMessage.newBuilder()
                .setData(ByteString.copyFrom(m.payload()))
                .putAllAttributes(m.headers());
        if (m.key() != null) {
            b.setOrderingKey(m.key());
        }
        return PubSubMessages.stamp(b, m.eventId()).build();
    }

    private Publisher publisher(OutboxMessage m) {
        String destination = m.destination();
        TopicName topic = TopicName.isParsableFrom(destination)
                ? TopicName.parse(destination)
                : TopicName.of(project, destination);
        return publishers.computeIfAbsent(topic, t -> {
            Publisher.Builder b = Publisher.newBuilder(t).setEnableMessageOrdering(true);
            if (channelProvider != null) {
                b.setChannelProvider(channelProvider);
            }
            if (credentialsProvider != null) {
                b.setCredentialsProvider(credentialsProvider);
            }
            if (batching != null) {
                b.setBatchingSettings(batching);
            }
            try {
                return b.build();
            } catch (IOException e) {
                throw new IllegalStateException("could not create a Pub/Sub publisher for " + t + ": " + e, e);
            }
        });
    }

    private static PublishFailure failure(OutboxMessage m, Throwable e) {
        Throwable cause = e;
        while (!(cause instanceof ApiException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        String what = "row " + m.id() + " (event " + m.eventId() + ") to Pub/Sub topic '" + m.destination() + "'";
        if (cause instanceof NotFoundException) {
            return PublishFailure.permanent(
                    "no topic for " + what + "; create the topic and replay the row", Receipt.NONE, e);
        }
        if (cause instanceof InvalidArgumentException || cause instanceof PermissionDeniedException) {
            return PublishFailure.permanent(
                    "Pub/Sub refused " + what + ": " + cause.getMessage() + "; publishing it again cannot succeed",
                    Receipt.NONE,
                    e);
        }
        return PublishFailure.retryable("publishing " + what + " failed: " + e.getMessage(), Receipt.NONE, e);
    }

    /** Flushes and shuts down the client publishers, waiting up to 30 s for each. */
    @Override
    public void close() {
        for (Publisher p : publishers.values()) {
            p.shutdown();
            try {
                p.awaitTermination(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Configures a {@link PubSubPublisher}; {@code project} is required. Not thread-safe. */
    public static final class Builder {
        private String project;
        private TransportChannelProvider channelProvider;
        private CredentialsProvider credentialsProvider;
        private BatchingSettings batching;

        private Builder() {}

        /** The project of destinations given as a bare topic id. */
        public Builder project(String project) {
            Objects.requireNonNull(project, "project");
            if (project.isBlank()) {
                throw new InvalidConfigurationException("project must not be blank");
            }
            this.project = project;
            return this;
        }

        /** The client's channel provider (an emulator: plaintext to {@code host:port}); default Google's endpoint. */
        public Builder channelProvider(TransportChannelProvider channelProvider) {
            this.channelProvider = Objects.requireNonNull(channelProvider, "channelProvider");
            return this;
        }

        /** The client's credentials (an emulator: {@code NoCredentialsProvider}); default application default credentials. */
        public Builder credentialsProvider(CredentialsProvider credentialsProvider) {
            this.credentialsProvider = Objects.requireNonNull(credentialsProvider, "credentialsProvider");
            return this;
        }

        /** The client's batching (count, bytes, delay per request); default the client's. */
        public Builder batching(BatchingSettings batching) {
            this.batching = Objects.requireNonNull(batching, "batching");
            return this;
        }

        /** @throws InvalidConfigurationException when the project is missing */
        public PubSubPublisher build() {
            if (project == null) {
                throw new InvalidConfigurationException("project is required, but was not set");
            }
            return new PubSubPublisher(this);
        }
    }
}
