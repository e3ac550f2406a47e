package dev.once;

/**
 * A write carried a fencing token older than the newest one the resource has accepted: the
 * writer's lease expired and someone else has since acquired it. The write was rejected inside
 * the same transaction, so nothing of it is applied. The stale worker must stop; retrying with
 * the same token will fail again.
 */
public class StaleFencingTokenException extends OnceException {

    private final String resource;
    private final long token;
    private final long newest;

    public StaleFencingTokenException(String resource, long token, long newest) {
        this(
                resource,
                token,
                newest,
                "the newest accepted token is " + newest + "; this writer's lease was taken over");
    }

    /**
     * @param why what superseded the writer, for the message: a resource that was deleted and created
     *            anew can hold a token no larger than the stale writer's
     */
    public StaleFencingTokenException(String resource, long token, long newest, String why) {
        super("fencing token " + token + " for resource '" + resource + "' is stale: " + why
                + "; stop and do not retry with this token");
        this.resource = resource;
        this.token = token;
        this.newest = newest;
    }

    public String resource() {
        return resource;
    }

    public long token() {
        return token;
    }

    /**
     * The token the resource holds now: larger than {@link #token()} after a takeover; no larger when
     * the resource was deleted and created anew (an idempotency key pruned and claimed again).
     */
    public long newest() {
        return newest;
    }
}
