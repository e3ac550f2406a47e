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
        super("fencing token " + token + " for resource '" + resource + "' is stale: the newest accepted token is "
                + newest + "; this writer's lease was taken over, stop and do not retry with this token");
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

    public long newest() {
        return newest;
    }
}
