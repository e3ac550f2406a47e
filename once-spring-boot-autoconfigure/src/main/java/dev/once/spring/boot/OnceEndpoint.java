package dev.once.spring.boot;

import dev.once.Schema;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxStats;
import dev.once.spring.OnceSpring;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The Actuator endpoint {@code once} ({@code /actuator/once}, exposed with
 * {@code management.endpoints.web.exposure.include=once}): what an operator looks at. A read gives the
 * schema version, the inbox (rows, the oldest claim and its age, the retention), the outbox (pending rows,
 * the age of the oldest, dead rows, whether this application's relay runs) and the first dead rows with
 * their last error; {@code POST /actuator/once/replay} and {@code POST /actuator/once/discard} with
 * {@code {"ids": "17,18"}} send dead rows again or delete them ({@link OutboxAdmin#replay},
 * {@link OutboxAdmin#discard}). Reading counts the inbox, one scan of it: an endpoint a person opens, not
 * one to scrape (the Micrometer gauges are for that). Thread-safe.
 */
@Endpoint(id = "once")
public class OnceEndpoint {

    /** Dead rows a read lists; page further with {@link OutboxAdmin#dead}. */
    public static final int DEAD_ROWS_SHOWN = 20;

    private final OnceSpring once;
    private final OutboxAdmin admin;
    private final OnceRelayLifecycle relay;
    private final OnceProperties properties;
    private final Clock clock;

    OnceEndpoint(OnceSpring once, OutboxAdmin admin, OnceRelayLifecycle relay, OnceProperties properties, Clock clock) {
        this.once = once;
        this.admin = admin;
        this.relay = relay;
        this.properties = properties;
        this.clock = clock;
    }

    @ReadOperation
    public Map<String, Object> once() {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("schema", Schema.status(once.dataSource(), once.tablePrefix()).describe());

        Map<String, Object> inbox = new LinkedHashMap<>();
        Map<String, Object> counted =
                new JdbcTemplate(once.dataSource()).queryForMap(once.dialect().inboxStats(once.tablePrefix()));
        Instant oldest = instant(counted.get("oldest_claim"));
        inbox.put("rows", ((Number) counted.get("inbox_rows")).longValue());
        inbox.put("oldestProcessedAt", oldest == null ? null : oldest.toString());
        inbox.put(
                "oldestAge",
                oldest == null
                        ? null
                        : Duration.between(oldest, clock.instant()).toString());
        inbox.put("retention", properties.getRetention().getInbox().toString());
        inbox.put(
                "redeliveryHorizon",
                properties.getRetention().getRedeliveryHorizon().toString());
        body.put("inbox", inbox);

        OutboxStats stats = admin.stats();
        Map<String, Object> outbox = new LinkedHashMap<>();
        outbox.put("pending", stats.pending());
        outbox.put("oldestPendingAge", stats.oldestPendingAge().toString());
        outbox.put("dead", stats.dead());
        outbox.put("relay", relay == null ? "not in this application" : relay.isRunning() ? "running" : "stopped");
        body.put("outbox", outbox);

        List<Map<String, Object>> dead = new ArrayList<>();
        for (DeadMessage d : admin.dead(0, DEAD_ROWS_SHOWN)) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("id", d.message().id());
            row.put("eventId", d.message().eventId());
            row.put("destination", d.message().destination());
            row.put("key", d.message().key());
            row.put("idempotencyKey", d.message().idempotencyKey());
            row.put("lastError", d.lastError());
            row.put("responseStatus", d.responseStatus());
            dead.add(row);
        }
        body.put("deadRows", dead);
        return body;
    }

    /**
     * {@code replay}: the dead rows go back to pending and are sent again; {@code discard}: they are deleted.
     *
     * @param ids comma-separated outbox row ids, as the read lists them
     */
    @WriteOperation
    public Map<String, Object> deadRows(@Selector String action, String ids) {
        List<Long> parsed;
        try {
            parsed = Arrays.stream(ids.split(","))
                    .map(String::strip)
                    .map(Long::valueOf)
                    .toList();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("ids must be comma-separated outbox row ids, but was '" + ids + "'");
        }
        int done = switch (action) {
            case "replay" -> admin.replay(parsed);
            case "discard" -> admin.discard(parsed);
            default -> throw new IllegalArgumentException("action must be replay or discard, but was '" + action + "'");
        };
        return Map.of("action", action, "requested", parsed.size(), "done", done);
    }

    private static Instant instant(Object value) {
        if (value instanceof Timestamp t) {
            return t.toInstant();
        }
        if (value instanceof java.time.OffsetDateTime o) {
            return o.toInstant();
        }
        if (value instanceof java.time.LocalDateTime l) {
            return l.toInstant(java.time.ZoneOffset.UTC);
        }
        return null;
    }
}
