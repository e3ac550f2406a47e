package dev.once.cli.internal;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.util.Locale;

/** Opens the database a command was pointed at, failing with a message that says what to check. */
public final class Databases {

    /** The form a {@code --url} must have, quoted in errors and help. */
    public static final String EXPECTED_URL = "a JDBC URL such as jdbc:postgresql://127.0.0.1:5432/app?user=app "
            + "(or jdbc:mariadb://127.0.0.1:3306/app?user=app)";

    private Databases() {}

    /**
     * A small pool on {@code url} whose first connection has already succeeded.
     *
     * @throws Failure usage error when the URL is not a JDBC URL; failure naming the URL and the
     *         driver's reason when the database cannot be reached
     */
    public static HikariDataSource open(String url, int poolSize) {
        String u = url == null ? "" : url.strip();
        String lower = u.toLowerCase(Locale.ROOT);
        if (lower.startsWith("postgres://") || lower.startsWith("postgresql://")) {
            throw Failure.usage("--url '" + url + "' is a libpq URL; expected " + EXPECTED_URL);
        }
        if (!lower.startsWith("jdbc:postgresql:")
                && !lower.startsWith("jdbc:mariadb:")
                && !lower.startsWith("jdbc:mysql:")) {
            throw Failure.usage("--url '" + url + "' is not a supported JDBC URL; expected " + EXPECTED_URL);
        }
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(u);
        config.setMaximumPoolSize(poolSize);
        config.setMinimumIdle(0);
        config.setPoolName("once-cli");
        config.setConnectionTimeout(5_000);
        config.setInitializationFailTimeout(1); // connect now, so an unreachable URL fails here, not later
        try {
            return new HikariDataSource(config);
        } catch (RuntimeException e) {
            throw Failure.failed(
                    "cannot connect to " + u + ": " + rootMessage(e)
                            + "; check that the database is running and that the URL's host, port, database and user are right",
                    e);
        }
    }

    /** The innermost message of a cause chain, which is where drivers put the reason. */
    public static String rootMessage(Throwable t) {
        Throwable c = t;
        String message = t.getMessage();
        while (c != null) {
            if (c.getMessage() != null && !c.getMessage().isBlank()) {
                message = c.getMessage();
            }
            c = c.getCause() == c ? null : c.getCause();
        }
        return message == null ? t.getClass().getSimpleName() : message;
    }
}
