package dev.once.examples.crashtest;

import dev.once.Outcome;
import dev.once.OutcomeListener;
import dev.once.examples.payments.PaymentsApplication;
import java.util.concurrent.CountDownLatch;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The payments application in a child JVM that stops dead in the ack gap: once a delivery's
 * transaction has committed it prints {@code COMMITTED <event id>} and parks the listener thread, so
 * the container never commits the offset; the test then SIGKILLs it.
 */
@Configuration(proxyBeanMethods = false)
public class CrashAfterCommit {

    public static void main(String[] args) {
        new SpringApplicationBuilder(PaymentsApplication.class, CrashAfterCommit.class).run(args);
    }

    @Bean
    OutcomeListener parkAfterCommit() {
        return (delivery, outcome) -> {
            if (outcome.status() != Outcome.Status.APPLIED) {
                return;
            }
            System.out.println("COMMITTED " + delivery.eventId());
            System.out.flush();
            try {
                new CountDownLatch(1).await(); // never released: the SIGKILL comes first
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }
}
