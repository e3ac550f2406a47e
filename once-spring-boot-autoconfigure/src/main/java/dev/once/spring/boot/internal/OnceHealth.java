package dev.once.spring.boot.internal;

import dev.once.Schema;
import dev.once.outbox.OutboxAdmin;
import dev.once.spring.OnceSpring;
import dev.once.spring.boot.OnceProperties;
import dev.once.spring.boot.OnceRelayLifecycle;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.beans.factory.ObjectProvider;

/**
 * What the {@code once} health indicator ({@code /actuator/health/once}) reports, on either Boot line:
 * DOWN when the once tables are missing or older than this once needs (with the fix), or when this
 * application runs a relay and it is not running; details: the schema version, pending outbox rows,
 * the age of the oldest (the relay's lag), dead rows, and the inbox retention next to the redelivery
 * horizon. Boot 3 and Boot 4 name their {@code HealthIndicator} differently, so each starter's
 * {@code OnceHealthAutoConfiguration} only turns this report into its line's {@code Health}.
 */
public final class OnceHealth {

    /** UP or DOWN, and the details in the order they are shown. */
    public record Report(boolean up, Map<String, Object> details) {}

    private final OutboxAdmin admin;
    private final ObjectProvider<OnceRelayLifecycle> relay;
    private final OnceProperties properties;
    private final OnceSpring once;

    public OnceHealth(
            OutboxAdmin admin, ObjectProvider<OnceRelayLifecycle> relay, OnceProperties properties, OnceSpring once) {
        this.admin = admin;
        this.relay = relay;
        this.properties = properties;
        this.once = once;
    }

    public Report check() {
        // read first: with the tables gone, the outbox statistics cannot be read either
        Schema.Status schema = Schema.status(once.dataSource(), once.tablePrefix());
        Map<String, Object> details = new LinkedHashMap<>();
        details.put("schema", schema.describe());
        if (!schema.isCurrent() && !schema.isUnversioned()) {
            details.put(
                    "fix", SchemaRefusal.message(schema, properties.getSchema().initialization(), once.dialect()));
            return new Report(false, details);
        }
        var stats = admin.stats();
        OnceRelayLifecycle r = relay.getIfAvailable();
        details.put("relay", r == null ? "not in this application" : r.isRunning() ? "running" : "stopped");
        details.put("outboxPending", stats.pending());
        details.put("outboxLag", stats.oldestPendingAge().toString());
        details.put("outboxDead", stats.dead());
        details.put("inboxRetention", properties.getRetention().getInbox().toString());
        details.put(
                "redeliveryHorizon",
                properties.getRetention().getRedeliveryHorizon().toString());
        return new Report(r == null || r.isRunning(), details);
    }
}
