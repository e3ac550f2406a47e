package dev.once.testkit.fault;

/**
 * How a {@link FaultProxy} fails the next {@code COMMIT} it sees: either way the client's commit
 * call fails with a broken connection and cannot tell which of the two happened, which is the
 * point (an unknown commit outcome).
 */
public enum CommitFault {
    /** The COMMIT never reaches the server; both sides are reset; the server rolls back. */
    DROP_REQUEST,
    /** The server commits; its reply is dropped and both sides are reset: committed, but the client never hears it. */
    DROP_REPLY
}
