package dev.once.internal;

import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The statement that puts the session's lock timeout back after a claim that set its own ({@link
 * Dialect#restoreLockTimeout}), so the handler's statements, and a joined caller's, keep theirs. It
 * goes in one string with the claim where the driver takes several statements in one ({@link
 * StatementsTogether}): no round trip of its own; else on its own after the claim's results are read.
 * A claim that fails sends no restore either way: its transaction is aborted or rolled back to before
 * the setting. Thread-safe. Not API.
 */
public final class LockTimeoutRestore {

    // Null when the claims change no setting: no lock timeout, or one the dialect scopes to the statement.
    private final String restore;
    private final StatementsTogether together;
    // Each claim string with the restore after it, built once per claim string rather than per claim.
    private final Map<String, String> joined = new ConcurrentHashMap<>();

    public LockTimeoutRestore(Dialect dialect, Duration lockTimeout, StatementsTogether together) {
        this.restore = lockTimeout == null ? null : dialect.restoreLockTimeout();
        this.together = together;
    }

    /** The string to prepare for {@code claim} on {@code c}: with the restore after it where they go together. */
    public String claim(Connection c, String claim) throws SQLException {
        if (restore == null || !together.allowed(c)) {
            return claim;
        }
        return joined.computeIfAbsent(claim, s -> s + "; " + restore);
    }

    /** Sends the restore on its own where {@link #claim} left it out; after the claim succeeded. */
    public void afterClaim(Connection c) throws SQLException {
        if (restore != null && !together.allowed(c)) {
            try (PreparedStatement ps = c.prepareStatement(restore)) {
                ps.execute();
            }
        }
    }
}
