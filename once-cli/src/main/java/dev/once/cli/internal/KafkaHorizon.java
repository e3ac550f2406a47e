package dev.once.cli.internal;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;

/**
 * What a Kafka cluster can hand a consumer group again, against the inbox retention: a group
 * idle past {@code offsets.retention.minutes} loses its committed offsets and, with
 * {@code auto.offset.reset=earliest}, re-reads whatever its topics still hold ({@code retention.ms});
 * a record older than the inbox retention has had its claim pruned and is applied again. The
 * inbox retention is safe when it outlasts every topic's retention: then nothing the broker can
 * replay has lost its claim. The doctor says which setting to change when it does not.
 */
public final class KafkaHorizon {

    private static final Duration TIMEOUT = Duration.ofSeconds(15);

    /** One finding: OK or WARN and what it says. */
    public record Finding(boolean ok, String text) {}

    private KafkaHorizon() {}

    /** Reads the broker's offset retention and each topic's {@code retention.ms}, and compares them with {@code inboxRetention}. */
    public static List<Finding> check(String bootstrapServers, Collection<String> topics, Duration inboxRetention)
            throws ExecutionException, InterruptedException, TimeoutException {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        List<Finding> findings = new ArrayList<>();
        try (Admin admin = Admin.create(p)) {
            Node node = admin.describeCluster().nodes().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).stream()
                    .findFirst()
                    .orElseThrow(
                            () -> new IllegalStateException("the cluster at " + bootstrapServers + " lists no broker"));
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
            List<ConfigResource> resources = new ArrayList<>();
            resources.add(broker);
            topics.forEach(t -> resources.add(new ConfigResource(ConfigResource.Type.TOPIC, t)));
            Map<ConfigResource, Config> configs =
                    admin.describeConfigs(resources).all().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            Duration offsets = Duration.ofMinutes(Long.parseLong(
                    configs.get(broker).get("offsets.retention.minutes").value()));
            findings.add(new Finding(
                    true,
                    "offsets.retention.minutes is " + offsets.toMinutes() + " (" + Durations.format(offsets)
                            + ") on broker " + node.idString()));
            for (String t : topics) {
                long ms = Long.parseLong(configs.get(new ConfigResource(ConfigResource.Type.TOPIC, t))
                        .get("retention.ms")
                        .value());
                String kept = ms < 0 ? "forever" : Durations.format(Duration.ofMillis(ms));
                if (ms >= 0 && inboxRetention.compareTo(Duration.ofMillis(ms)) > 0) {
                    findings.add(new Finding(
                            true,
                            "topic " + t + " keeps records " + kept + ", less than the inbox retention of "
                                    + Durations.format(inboxRetention)));
                } else {
                    findings.add(new Finding(
                            false,
                            "topic " + t + " keeps records " + kept + ", not less than the"
                                    + " inbox retention of " + Durations.format(inboxRetention) + ": a group idle past"
                                    + " offsets.retention.minutes (" + Durations.format(offsets)
                                    + ") or reset to earliest"
                                    + " re-reads records whose claims were pruned and applies them again; make the inbox"
                                    + " retention (InboxPruner, --retention) longer than " + kept
                                    + (ms < 0 ? "" : " plus your" + " longest consumer outage")
                                    + ", or shorten retention.ms of " + t + ", or consume with"
                                    + " auto.offset.reset=none"));
                }
            }
        }
        return findings;
    }
}
