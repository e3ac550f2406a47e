package dev.once.outbox;

import java.util.Objects;

/**
 * A row the relay gave up on, as an operator sees it. Immutable.
 *
 * @param message        the message as it would be sent again ({@code attempts} = sends tried)
 * @param lastError      why the last send failed
 * @param responseStatus the destination's last status (HTTP status), 0 when it answered none
 */
public record DeadMessage(OutboxMessage message, String lastError, int responseStatus) {

    public DeadMessage {
        Objects.requireNonNull(message, "message");
        lastError = lastError == null ? "" : lastError;
    }
}
