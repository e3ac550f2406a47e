package dev.once.pubsub;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutureCallback;
import com.google.api.core.ApiFutures;
import com.google.api.gax.batching.BatchingSettings;
import com.google.api.gax.core.CredentialsProvider;
import com.google.api.gax.rpc.ApiException;
import com.google.api.gax.rpc.InvalidArgumentException;
import com.google.api.gax.rpc.NotFoundException;
import com.google.api.gax.rpc.StatusCode;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.TopicAdminClient;
import com.google.cloud.pubsub.v1.TopicAdminSettings;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.PublishRequest;
import com.google.pubsub.v1.PublishResponse;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.TopicName;
import dev.once.InvalidConfigurationException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

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
 * <p><b>Batches.</b> {@link #publishAll} sends a batch's rows of one topic in one {@code Publish}
 * request (split at {@value #MAX_REQUEST_MESSAGES} messages or {@value #MAX_REQUEST_BYTES} bytes,
 * Pub/Sub's limits), rows of different ordering keys together. Not through the client library's
 * batching {@code Publisher}: with message ordering on, it batches each ordering key apart, so a
 * relay batch over a thousand keys became a thousand requests (2,600 messages/s on the emulator,
 * against 17,000 in one request). Per-key order does not need the client's ordering: the relay
 * hands a batch at most one row per key and the next row of a key only after this one is
 * acknowledged. Pub/Sub answers a request as a whole: a request it refuses as invalid (one
 * message too large, a bad attribute) is sent again one message per request, so the message at
 * fault fails alone and the others are published.
 *
 * <p><b>Deduplication.</b> Pub/Sub has none on publish: a relay that re-sends after a crash makes
 * a second message with the same event id, which the consumer's inbox absorbs.
 *
 * <p><b>Receipt.</b> Status 0; body {@code topic=<name> messageId=<id>}. A refused publish records
 * Pub/Sub's answer: its status as HTTP maps it (404 for a missing topic, 400 for an invalid message)
 * and the gRPC code with its message.
 *
 * <p><b>Failure contract.</b> Permanent: the topic does not exist, or the message is invalid (too
 * large, a bad attribute). Retryable: everything else (unavailable, deadline exceeded, which the
 * client retries itself first; and a denied or unauthenticated publish: credentials and permissions
 * can be fixed without changing the message, as on every publisher).
 *
 * <p>Thread-safe. {@link #close()} shuts down the client, waiting for the requests in flight.
 */
public final class PubSubPublisher implements dev.once.outbox.Publisher, AutoCloseable {

    /** Messages Pub/Sub takes in one {@code Publish} request. */
    public static final int MAX_REQUEST_MESSAGES = 1000;
    /** Bytes of messages this publisher puts in one request: below Pub/Sub's 10 MB, leaving room for the envelope. */
    public static final int MAX_REQUEST_BYTES = 9_000_000;

    private final String project;
    private final TransportChannelProvider channelProvider;
    private final CredentialsProvider credentialsProvider;
    private TopicAdminClient client;

    private PubSubPublisher(Builder b) {
        this.project = b.project;
        this.channelProvider = b.channelProvider;
        this.credentialsProvider = b.credentialsProvider;
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Publishes one row and waits for the server's message id.
     *
     * @throws PublishFailure permanent for a missing topic or an invalid message; retryable otherwise,
     *                        also when no answer came within two minutes
     */
    @Override
    public Receipt publish(OutboxMessage message) throws Exception {
        try {
            return publishAll(List.of(message)).get(0).toCompletableFuture().get(2, TimeUnit.MINUTES);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        } catch (TimeoutException e) {
            throw PublishFailure.retryable(
                    "no answer from Pub/Sub for row " + message.id() + " (event " + message.eventId()
                            + ") within 2 minutes; it may or may not have been published",
                    Receipt.NONE,
                    e);
        }
    }

    /** Sends the rows in one request per topic (or a few, at Pub/Sub's limits) and returns one stage per row. */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        TopicAdminClient c;
        try {
            c = client();
        } catch (RuntimeException e) {
            return messages.stream()
                    .map(m -> CompletableFuture.<Receipt>failedFuture(failure(m, e)))
                    .map(f -> (CompletionStage<Receipt>) f)
                    .toList();
        }
        Map<TopicName, List<Sent>> byTopic = new LinkedHashMap<>();
        for (OutboxMessage m : messages) {
            CompletableFuture<Receipt> result = new CompletableFuture<>();
            results.add(result);
            try {
                Sent sent = new Sent(m, message(m), result);
                byTopic.computeIfAbsent(topic(m), t -> new ArrayList<>()).add(sent);
            } catch (RuntimeException e) {
                result.completeExceptionally(failure(m, e)); // this row alone
            }
        }
        byTopic.forEach((topic, sent) -> {
            int from = 0;
            long bytes = 0;
            for (int i = 0; i < sent.size(); i++) {
                long size = sent.get(i).pubsub().getSerializedSize();
                if (i > from && (i - from == MAX_REQUEST_MESSAGES || bytes + size > MAX_REQUEST_BYTES)) {
                    send(c, topic, sent.subList(from, i));
                    from = i;
                    bytes = 0;
                }
                bytes += size;
            }
            send(c, topic, sent.subList(from, sent.size()));
        });
        return results;
    }

    /** A row on its way: the outbox message, it as Pub/Sub's, and the stage the relay waits on. */
    private record Sent(OutboxMessage row, PubsubMessage pubsub, CompletableFuture<Receipt> result) {}

    private static void send(TopicAdminClient client, TopicName topic, List<Sent> request) {
        ApiFuture<PublishResponse> answer;
        try {
            answer = client.publishCallable()
                    .futureCall(PublishRequest.newBuilder()
                            .setTopic(topic.toString())
                            .addAllMessages(request.stream().map(Sent::pubsub).toList())
                            .build());
        } catch (RuntimeException e) {
            request.forEach(s -> s.result().completeExceptionally(failure(s.row(), e)));
            return;
        }
        ApiFutures.addCallback(
                answer,
                new ApiFutureCallback<>() {
                    @Override
                    public void onSuccess(PublishResponse response) {
                        if (response.getMessageIdsCount() != request.size()) {
                            request.forEach(s -> s.result()
                                    .completeExceptionally(PublishFailure.retryable(
                                            "Pub/Sub answered " + response.getMessageIdsCount() + " message ids for a"
                                                    + " request of " + request.size() + " messages to " + topic
                                                    + "; the relay sends them again",
                                            Receipt.NONE,
                                            null)));
                            return;
                        }
                        for (int i = 0; i < request.size(); i++) {
                            String id = response.getMessageIds(i);
                            request.get(i).result().complete(new Receipt(0, "topic=" + topic + " messageId=" + id));
                        }
                    }

                    @Override
                    public void onFailure(Throwable t) {
                        if (request.size() > 1 && cause(t) instanceof InvalidArgumentException) {
                            // Pub/Sub does not say which message it refused: one request each finds it.
                            request.forEach(s -> send(client, topic, List.of(s)));
                            return;
                        }
                        request.forEach(s -> s.result().completeExceptionally(failure(s.row(), t)));
                    }
                },
                MoreExecutors.directExecutor());
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

    private TopicName topic(OutboxMessage m) {
        String destination = m.destination();
        return TopicName.isParsableFrom(destination)
                ? TopicName.parse(destination)
                : TopicName.of(project, destination);
    }

    // Made at the first publish, as the client library's publisher was: building it reads credentials.
    private synchronized TopicAdminClient client() {
        if (client == null) {
            TopicAdminSettings.Builder b = TopicAdminSettings.newBuilder();
            // Off: the generated client would otherwise hold a request up to 10 ms to merge it with
            // others; a relay batch is already one request.
            b.publishSettings()
                    .setBatchingSettings(
                            BatchingSettings.newBuilder().setIsEnabled(false).build());
            if (channelProvider != null) {
                b.setTransportChannelProvider(channelProvider);
            }
            if (credentialsProvider != null) {
                b.setCredentialsProvider(credentialsProvider);
            }
            try {
                client = TopicAdminClient.create(b.build());
            } catch (IOException e) {
                throw new IllegalStateException(
                        "could not create a Pub/Sub client for project " + project + ": " + e, e);
            }
        }
        return client;
    }

    // What Pub/Sub answered a refused publish: its status as HTTP maps it (404, 400), the gRPC code and message.
    private static Receipt answer(ApiException api) {
        StatusCode.Code code = api.getStatusCode().getCode();
        return new Receipt(code.getHttpStatusCode(), code + ": " + api.getMessage());
    }

    private static Throwable cause(Throwable e) {
        Throwable cause = e;
        while (!(cause instanceof ApiException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    // Package-private for PubSubPublisherFailureTest: the emulator denies nothing.
    static PublishFailure failure(OutboxMessage m, Throwable e) {
        Throwable cause = cause(e);
        String what = "row " + m.id() + " (event " + m.eventId() + ") to Pub/Sub topic '" + m.destination() + "'";
        if (cause instanceof NotFoundException api) {
            return PublishFailure.permanent(
                    "no topic for " + what + "; create the topic and replay the row", answer(api), e);
        }
        if (cause instanceof InvalidArgumentException api) {
            return PublishFailure.permanent(
                    "Pub/Sub refused " + what + ": " + cause.getMessage() + "; publishing it again cannot succeed",
                    answer(api),
                    e);
        }
        return PublishFailure.retryable("publishing " + what + " failed: " + e.getMessage(), Receipt.NONE, e);
    }

    /** Shuts down the client, waiting up to 30 s for the requests in flight. */
    @Override
    public synchronized void close() {
        if (client == null) {
            return;
        }
        client.shutdown();
        try {
            client.awaitTermination(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Configures a {@link PubSubPublisher}; {@code project} is required. Not thread-safe. */
    public static final class Builder {
        private String project;
        private TransportChannelProvider channelProvider;
        private CredentialsProvider credentialsProvider;

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

        /** @throws InvalidConfigurationException when the project is missing */
        public PubSubPublisher build() {
            if (project == null) {
                throw new InvalidConfigurationException("project is required, but was not set");
            }
            return new PubSubPublisher(this);
        }
    }
}
