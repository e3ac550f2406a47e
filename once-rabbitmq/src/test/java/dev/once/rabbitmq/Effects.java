package dev.once.rabbitmq;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import java.sql.PreparedStatement;

/** The test business effect: a row per applied event. */
final class Effects {

    static final String CREATE =
            "CREATE TABLE effect (seq bigserial PRIMARY KEY, event_id text NOT NULL, attempt int NOT NULL)";

    private Effects() {}

    /** Body "retry" always fails retryably, "poison" permanently; anything else writes a row. */
    static final Handler HANDLER = (Delivery d, dev.once.Tx tx) -> {
        switch (d.payloadText()) {
            case "retry" -> throw new RetryableException("event " + d.eventId() + " always fails retryably");
            case "poison" -> throw new PermanentFailureException("event " + d.eventId() + " can never succeed");
            default -> {
                try (PreparedStatement ps =
                        tx.connection().prepareStatement("INSERT INTO effect (event_id, attempt) VALUES (?, ?)")) {
                    ps.setString(1, d.eventId()); // 1: event id
                    ps.setInt(2, d.attempt()); // 2: attempt
                    ps.executeUpdate();
                }
            }
        }
    };
}
