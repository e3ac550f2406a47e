package dev.once.kafka;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;

/**
 * Child JVM of {@link ScaleTest}: one consumer of the group, set-wise ({@link KafkaLedger#BATCH_CREDIT}).
 * Prints {@code STATS applied=… duplicates=…} every half second, and {@code FINAL …} after a graceful
 * close on SIGTERM.
 *
 * <p>Arguments: bootstrap servers, topic, group, JDBC URL, session timeout in ms, max.poll.records.
 */
public final class ScaleConsumerMain {

    private ScaleConsumerMain() {}

    public static void main(String[] args) throws Exception {
        HikariConfig pool = new HikariConfig();
        pool.setJdbcUrl(args[3]);
        pool.setMaximumPoolSize(2);
        HikariDataSource ds = new HikariDataSource(pool);
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args[4]);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Integer.parseInt(args[4]) / 4));
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, args[5]);
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "20000");
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
                .kafkaProperties(props)
                .topics(args[1])
                .dataSource(ds)
                .consumer("ledger")
                .batchHandler(KafkaLedger.BATCH_CREDIT)
                .meterRegistry(meters)
                .build()
                .start();
        ScheduledExecutorService stats = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "stats");
            t.setDaemon(true);
            return t;
        });
        stats.scheduleAtFixedRate(() -> print("STATS", meters), 500, 500, TimeUnit.MILLISECONDS);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stats.shutdownNow();
            runner.close();
            print("FINAL", meters);
            ds.close();
            closed.countDown();
        }));
        System.out.println("READY");
        System.out.flush();
        closed.await();
    }

    private static synchronized void print(String tag, SimpleMeterRegistry meters) {
        System.out.println(tag + " applied=" + Meters.applied(meters) + " duplicates=" + Meters.duplicates(meters));
        System.out.flush();
    }
}
