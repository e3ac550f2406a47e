package dev.once.chaos;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;

/** The two databases the chaos tests run on, and direct URLs to a test's own schema, for proxying. */
enum Databases {
    POSTGRES,
    MARIADB;

    /** A fresh schema (PostgreSQL) or database (MariaDB) with the once tables. */
    TestDatabase fresh(int poolSize) {
        return this == POSTGRES
                ? TestPostgres.shared().freshDatabase(poolSize)
                : TestMariaDb.shared().freshDatabase(poolSize);
    }

    /** A JDBC URL straight to {@code db}'s schema, the form {@link dev.once.testkit.fault.FaultProxy#forJdbcUrl} takes. */
    String directUrl(TestDatabase db) {
        if (this == POSTGRES) {
            String url = TestPostgres.shared().jdbcUrl();
            return url + (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
        }
        String url = System.getenv(TestMariaDb.URL_ENV);
        url = url == null || url.isBlank() ? TestMariaDb.DEFAULT_URL : url;
        return url.replaceFirst("/[^/?]*(\\?|$)", "/" + db.name() + "$1");
    }

    /**
     * A pool on {@code url} that gives up quickly on a dead link, so a fault costs seconds, not
     * the drivers' defaults (no socket timeout at all on pgjdbc).
     */
    static HikariDataSource pool(String url, int size, String name) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url
                + (url.contains("?") ? "&" : "?")
                + (url.startsWith("jdbc:postgresql:")
                        ? "socketTimeout=10&connectTimeout=5"
                        : "socketTimeout=10000&connectTimeout=5000"));
        config.setMaximumPoolSize(size);
        config.setMinimumIdle(0);
        config.setConnectionTimeout(30_000);
        config.setValidationTimeout(1_000);
        config.setPoolName(name);
        return new HikariDataSource(config);
    }
}
