package dev.once.cli.demo;

import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;

/** Schemas a demo test gives the demo, dropped afterwards so a shared PostgreSQL keeps no leftovers. */
final class DemoSchemas {

    private DemoSchemas() {}

    static String name(String test) {
        return "once_demo_" + test + "_" + ProcessHandle.current().pid();
    }

    /** Drops the demo's schema and its provider's. */
    static void drop(String schema) throws SQLException {
        try (Connection c = DriverManager.getConnection(TestPostgres.shared().jdbcUrl());
                Statement s = c.createStatement()) {
            s.execute("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
            s.execute("DROP SCHEMA IF EXISTS " + schema + "_provider CASCADE");
        }
    }
}
