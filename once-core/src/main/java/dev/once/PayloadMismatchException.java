package dev.once;

/**
 * The failure of a delivery whose event id was already applied with a different payload, under
 * {@link MismatchPolicy#FAIL_PERMANENT}: the producer reused the id for another event. Nothing of
 * the delivery was applied; the adapter dead-letters it. Carries the two fingerprints (16 hex
 * digits each), never the payload.
 */
public final class PayloadMismatchException extends PermanentFailureException {

    private final String eventId;
    private final String storedFingerprint;
    private final String deliveredFingerprint;

    public PayloadMismatchException(String eventId, String storedFingerprint, String deliveredFingerprint) {
        super("event '" + eventId + "' was already applied with a different payload (fingerprint "
                + storedFingerprint + ", this delivery's " + deliveredFingerprint
                + "): the producer reused the event id for another event; this delivery is not applied");
        this.eventId = eventId;
        this.storedFingerprint = storedFingerprint;
        this.deliveredFingerprint = deliveredFingerprint;
    }

    /** The reused event id. */
    public String eventId() {
        return eventId;
    }

    /** The fingerprint of the payload that was applied, as the inbox keeps it. */
    public String storedFingerprint() {
        return storedFingerprint;
    }

    /** The fingerprint of this delivery's payload. */
    public String deliveredFingerprint() {
        return deliveredFingerprint;
    }
}
