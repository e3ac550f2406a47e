package dev.once.kafka;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Child JVM of {@link AckGapCrashTest}: a runner whose first batch commits in the database, prints
 * {@value #MARKER} and then hangs in the ack gap, before {@code commitSync}, until the test kills it.
 *
 * <p>Arguments: bootstrap servers, topic, group, JDBC URL, session timeout in ms, and optionally
 * {@code offsets-in-database}.
 */
public final class AckGapConsumerMain {

    static final String MARKER = "DB_COMMITTED";

    private AckGapConsumerMain() {}

    public static void main(String[] args) throws Exception {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(args[3]);
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args[4]);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Integer.parseInt(args[4]) / 4));
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        CountDownLatch never = new CountDownLatch(1);
        KafkaConsumerRunner.builder()
                .kafkaProperties(props)
                .topics(args[1])
                .dataSource(ds)
                .consumer("ledger")
                .handler(KafkaLedger.CREDIT)
                .offsetsInDatabase(args.length > 5 && args[5].equals("offsets-in-database"))
                .afterDatabaseCommit(offsets -> {
                    if (offsets.isEmpty()) {
                        return;
                    }
                    System.out.println(MARKER + " " + offsets);
                    System.out.flush();
                    try {
                        never.await(); // the ack gap, held open until SIGKILL
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                })
                .build()
                .start();
        never.await();
    }
}
