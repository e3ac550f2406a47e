package dev.once.testkit.spring;

import dev.once.Outcome;
import dev.once.OutcomeListener;
import dev.once.testsupport.ChildJvm;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;

/**
 * Crash in the ack gap for a Spring Boot application, in one line: the application runs in a child JVM
 * (this JVM's class path), the test sends an event, and once that event's database transaction has
 * committed the child stops dead before the container commits the offset (or acks): SIGKILL, no shutdown
 * hook, no last acknowledgement. The broker then hands the event over again to whatever consumes next,
 * which is what the test asserts on.
 *
 * <pre>{@code
 * SpringAckGap.killAfterCommit(PaymentsApplication.class, args, "pay-1", () -> publish("pay-1", "acc,20"));
 * // the ledger was credited (the commit happened) and the offset was not committed: start the
 * // application again and assert the redelivery is a duplicate (credited once)
 * }</pre>
 *
 * <p>How: the child runs the application with one more {@code OutcomeListener} bean (primary, so the
 * starter uses it instead of the application's own), which the starter calls after each commit; for an
 * applied event it prints {@code COMMITTED <event id>} and parks the listener thread, so the method never
 * returns and the container never acknowledges. Needs once-spring-boot-starter in the application and
 * spring-boot on the test class path.
 */
public final class SpringAckGap {

    /** Printed by the child once an event's transaction committed. */
    public static final String MARKER = "COMMITTED ";

    private SpringAckGap() {}

    /**
     * Starts {@code application} with {@code args} in a child JVM, runs {@code send}, waits (up to
     * {@code timeout}) until the child has committed {@code eventId}, and kills it.
     *
     * @throws IllegalStateException with the child's output if it exits, or does not commit the event in time
     */
    public static void killAfterCommit(
            Class<?> application, String[] args, String eventId, Duration timeout, ThrowingRunnable send)
            throws Exception {
        String[] childArgs = new String[args.length + 1];
        childArgs[0] = application.getName();
        System.arraycopy(args, 0, childArgs, 1, args.length);
        try (ChildJvm child = ChildJvm.start(Child.class, Map.of(), childArgs)) {
            send.run();
            child.awaitLine(line -> line.equals(MARKER + eventId), timeout);
            child.kill();
        }
    }

    /**
     * {@link #killAfterCommit(Class, String[], String, Duration, ThrowingRunnable)} with {@link #DEFAULT_TIMEOUT}
     * to start the application and commit the event.
     */
    public static void killAfterCommit(Class<?> application, String[] args, String eventId, ThrowingRunnable send)
            throws Exception {
        killAfterCommit(application, args, eventId, DEFAULT_TIMEOUT, send);
    }

    /** Generous: a Spring Boot application with JPA took 90 s to join its consumer group on a loaded 2-core CI machine. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);

    /** What the test does once the child runs: usually, publish the event. */
    @FunctionalInterface
    public interface ThrowingRunnable {
        void run() throws Exception;
    }

    /** The child's main: the application class name, then the application's arguments. */
    public static final class Child {
        private Child() {}

        public static void main(String[] args) throws ClassNotFoundException {
            Class<?> application = Class.forName(args[0]);
            new SpringApplicationBuilder(application, ParkAfterCommit.class)
                    .run(Arrays.copyOfRange(args, 1, args.length));
        }
    }

    /** The bean that stops the child in the ack gap (the child runs on the class path, where Spring reaches it). */
    @Configuration(proxyBeanMethods = false)
    static class ParkAfterCommit {
        @Bean
        @Primary
        OutcomeListener onceAckGapCrash() {
            return (delivery, outcome) -> {
                if (outcome.status() != Outcome.Status.APPLIED) {
                    return;
                }
                System.out.println(MARKER + delivery.eventId());
                System.out.flush();
                try {
                    new CountDownLatch(1).await(); // never released: the SIGKILL comes first
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
        }
    }
}
