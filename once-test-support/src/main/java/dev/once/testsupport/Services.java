package dev.once.testsupport;

import java.util.Arrays;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;

/**
 * Decides what a test does when a service it needs cannot be reached: skip with a message that
 * says how to run it, or, when the service is listed in {@value #REQUIRE_ENV} (as CI does), fail.
 * A required test can therefore never be skipped silently.
 */
public final class Services {

    /** Comma-separated services that must be reachable ({@code postgres,kafka,rabbitmq,nats,sqs,mariadb,pubsub}), or {@code all}. */
    public static final String REQUIRE_ENV = "ONCE_REQUIRE_SERVICES";

    private Services() {}

    /** True when {@code service} is listed in {@value #REQUIRE_ENV} (or it says {@code all}). */
    public static boolean required(String service) {
        String value = System.getenv(REQUIRE_ENV);
        if (value == null || value.isBlank()) {
            return false;
        }
        Set<String> names = Arrays.stream(value.split(","))
                .map(s -> s.strip().toLowerCase(Locale.ROOT))
                .collect(Collectors.toSet());
        return names.contains("all") || names.contains(service.toLowerCase(Locale.ROOT));
    }

    /**
     * Reports {@code service} as unreachable: aborts the test (skipped) unless required, fails it otherwise.
     *
     * @param howToRun what the reader does to run the test, e.g. "start RabbitMQ on 127.0.0.1:5672"
     */
    public static RuntimeException unavailable(String service, String howToRun, Throwable cause) {
        String message = service + " is not reachable (" + (cause == null ? "no answer" : cause.getMessage())
                + "); to run this test: " + howToRun;
        if (required(service)) {
            throw new IllegalStateException(message + " [required by " + REQUIRE_ENV + "]", cause);
        }
        Assumptions.abort(message);
        return new IllegalStateException(message); // not reached: abort throws
    }
}
