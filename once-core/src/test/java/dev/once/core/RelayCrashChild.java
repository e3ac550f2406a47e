package dev.once.core;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.concurrent.CountDownLatch;

/**
 * The relay of {@link OutboxRelayCrashTest}, in a JVM of its own: sends one batch over HTTP, prints
 * {@code PUBLISHED <event id>} once the provider accepted a row, and then hangs before marking it
 * sent, where the test kills it with SIGKILL. Argument: the JDBC URL of the test's schema.
 */
public final class RelayCrashChild {

    private RelayCrashChild() {}

    public static void main(String[] args) throws Exception {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(args[0]);
        config.setMaximumPoolSize(2);
        HikariDataSource ds = new HikariDataSource(config);
        HttpPublisher http = HttpPublisher.builder().build();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(ds)
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    Receipt r = http.publish(m);
                    System.out.println("PUBLISHED " + m.eventId() + " " + r.status());
                    System.out.flush();
                    new CountDownLatch(1).await(); // the ack gap: published, not yet marked sent
                    return r;
                })
                .build();
        System.out.println("RELAYED " + relay.relayOnce());
    }
}
