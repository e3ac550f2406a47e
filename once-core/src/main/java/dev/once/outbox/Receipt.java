package dev.once.outbox;

/**
 * What a destination answered to a send, recorded on the outbox row ({@code response_status},
 * {@code response}) for audit: an HTTP status and body, or a broker's offset or message id. Immutable.
 *
 * @param status a status code (HTTP status), or 0 where the destination has none
 * @param body   the answer as text, truncated to {@value #MAX_BODY} characters; empty when none
 */
public record Receipt(int status, String body) {

    /** Longest recorded answer, in characters; longer ones are cut. */
    public static final int MAX_BODY = 4000;

    /** Nothing to record. */
    public static final Receipt NONE = new Receipt(0, "");

    public Receipt {
        body = body == null ? "" : body.length() > MAX_BODY ? body.substring(0, MAX_BODY) : body;
    }
}
