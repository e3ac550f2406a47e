package dev.once.spring.boot;

import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Predicate;

/**
 * The relay's default publisher: {@code http://} and {@code https://} destinations go to an
 * {@link HttpPublisher} (with the row's {@code Idempotency-Key}), anything else to the first broker
 * publisher that accepts it (the Kafka one when spring-kafka's {@code ProducerFactory} is a bean). A
 * destination nobody accepts is a permanent failure: the row goes to dead, with the reason.
 */
public final class OncePublishers {

    private OncePublishers() {}

    /**
     * A publisher for destinations {@code accepts} says yes to.
     *
     * @param name for error messages ({@code kafka})
     */
    public record BrokerPublisher(String name, Predicate<String> accepts, Publisher publisher)
            implements AutoCloseable {
        public BrokerPublisher {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(accepts, "accepts");
            Objects.requireNonNull(publisher, "publisher");
        }

        /**
         * Closes the publisher when it holds resources (a Kafka producer of its own): as a bean it
         * is closed with the context, after the relay that uses it.
         */
        @Override
        public void close() throws Exception {
            if (publisher instanceof AutoCloseable c) {
                c.close();
            }
        }
    }

    /** HTTP(S) URLs to HTTP, the rest to the first broker publisher that accepts the destination. */
    public static Publisher routing(List<BrokerPublisher> brokers) {
        return new Routing(HttpPublisher.builder().build(), List.copyOf(brokers));
    }

    private record Routing(HttpPublisher http, List<BrokerPublisher> brokers) implements Publisher {

        @Override
        public Receipt publish(OutboxMessage message) throws Exception {
            return route(message, http, brokers);
        }

        /**
         * Each target's share of the batch goes to that target's own {@code publishAll}, so a batch
         * to Kafka and HTTP is sent concurrently by both; stages come back in the batch's order. A
         * target whose {@code publishAll} throws, or answers other than one stage per message, fails
         * its own share only (retryable, as any unexpected failure): one target never decides another
         * target's messages.
         */
        @Override
        public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
            Map<Publisher, List<Integer>> positions = new LinkedHashMap<>();
            List<CompletionStage<Receipt>> stages = new ArrayList<>(Collections.nCopies(messages.size(), null));
            for (int i = 0; i < messages.size(); i++) {
                Publisher target = target(messages.get(i).destination(), http, brokers);
                if (target == null) {
                    stages.set(
                            i,
                            CompletableFuture.failedFuture(
                                    noPublisher(messages.get(i).destination(), brokers)));
                } else {
                    positions.computeIfAbsent(target, t -> new ArrayList<>()).add(i);
                }
            }
            positions.forEach((target, at) -> {
                List<CompletionStage<Receipt>> sent;
                try {
                    sent = target.publishAll(at.stream().map(messages::get).toList());
                } catch (RuntimeException e) {
                    at.forEach(i -> stages.set(i, CompletableFuture.failedFuture(e)));
                    return;
                }
                if (sent == null || sent.size() != at.size()) {
                    IllegalStateException e = new IllegalStateException("publisher " + target + " answered "
                            + (sent == null ? "null" : sent.size() + " results") + " for " + at.size()
                            + " messages; Publisher.publishAll must return one per message");
                    at.forEach(i -> stages.set(i, CompletableFuture.failedFuture(e)));
                    return;
                }
                for (int j = 0; j < at.size(); j++) {
                    stages.set(at.get(j), sent.get(j));
                }
            });
            return stages;
        }
    }

    private static Publisher target(String destination, HttpPublisher http, List<BrokerPublisher> brokers) {
        if (destination.startsWith("http://") || destination.startsWith("https://")) {
            return http;
        }
        for (BrokerPublisher b : brokers) {
            if (b.accepts().test(destination)) {
                return b.publisher();
            }
        }
        return null;
    }

    private static Receipt route(OutboxMessage message, HttpPublisher http, List<BrokerPublisher> brokers)
            throws Exception {
        Publisher target = target(message.destination(), http, brokers);
        if (target == null) {
            throw noPublisher(message.destination(), brokers);
        }
        return target.publish(message);
    }

    private static PublishFailure noPublisher(String d, List<BrokerPublisher> brokers) {
        return PublishFailure.permanent(
                "no publisher for outbox destination '" + d + "': it is not an http(s)"
                        + " URL and "
                        + (brokers.isEmpty()
                                ? "no broker publisher is configured (add spring-kafka with a"
                                        + " ProducerFactory bean, or define a Publisher bean named 'oncePublisher')"
                                : "none of "
                                        + brokers.stream()
                                                .map(BrokerPublisher::name)
                                                .toList() + " accepts it"),
                Receipt.NONE,
                null);
    }
}
