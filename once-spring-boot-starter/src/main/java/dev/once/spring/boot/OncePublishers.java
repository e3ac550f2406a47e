package dev.once.spring.boot;

import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.util.List;
import java.util.Objects;
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
    public record BrokerPublisher(String name, Predicate<String> accepts, Publisher publisher) {
        public BrokerPublisher {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(accepts, "accepts");
            Objects.requireNonNull(publisher, "publisher");
        }
    }

    /** HTTP(S) URLs to HTTP, the rest to the first broker publisher that accepts the destination. */
    public static Publisher routing(List<BrokerPublisher> brokers) {
        List<BrokerPublisher> all = List.copyOf(brokers);
        HttpPublisher http = HttpPublisher.builder().build();
        return message -> route(message, http, all);
    }

    private static Receipt route(OutboxMessage message, HttpPublisher http, List<BrokerPublisher> brokers)
            throws Exception {
        String d = message.destination();
        if (d.startsWith("http://") || d.startsWith("https://")) {
            return http.publish(message);
        }
        for (BrokerPublisher b : brokers) {
            if (b.accepts().test(d)) {
                return b.publisher().publish(message);
            }
        }
        throw PublishFailure.permanent(
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
