package dev.once.cli;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.OnceException;
import dev.once.Schema;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.Failure;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code once schema print|migrate}: the once tables as SQL, or applied to a database. */
@Command(
        name = "schema",
        mixinStandardHelpOptions = true,
        description = "Print the once tables as SQL, or apply the missing migrations to a database.",
        subcommands = {SchemaCommand.Print.class, SchemaCommand.Migrate.class})
final class SchemaCommand implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "Missing subcommand: print or migrate");
    }

    static Dialect dialect(String name) {
        try {
            return Dialects.byName(name);
        } catch (OnceException e) {
            throw Failure.usage("--dialect '" + name + "' is not supported; expected postgres or mariadb");
        }
    }

    static String prefix(String prefix) {
        try {
            return TablePrefix.validate(prefix);
        } catch (OnceException e) {
            throw Failure.usage("--prefix: " + e.getMessage());
        }
    }

    @Command(
            name = "print",
            mixinStandardHelpOptions = true,
            description = "Print the whole schema of a dialect as one script, for your own migration tool.")
    static final class Print implements Callable<Integer> {
        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Option(
                names = "--dialect",
                defaultValue = "postgres",
                description = "postgres or mariadb (default: ${DEFAULT-VALUE})")
        String dialect;

        @Option(
                names = "--prefix",
                defaultValue = TablePrefix.DEFAULT,
                description = "table name prefix (default: ${DEFAULT-VALUE})")
        String prefix;

        @Option(names = "--url", description = "ignored by print; accepted so print and migrate take the same options")
        String url;

        @Override
        public Integer call() {
            spec.commandLine()
                    .getOut()
                    .print(Schema.script(SchemaCommand.dialect(dialect), SchemaCommand.prefix(prefix)));
            return 0;
        }
    }

    @Command(
            name = "migrate",
            mixinStandardHelpOptions = true,
            description = "Apply the migrations the database lacks, each in its own transaction.")
    static final class Migrate implements Callable<Integer> {
        @CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Option(names = "--url", required = true, description = Databases.EXPECTED_URL)
        String url;

        @Option(
                names = "--dialect",
                description = "postgres or mariadb; detected from the database when omitted, checked when given")
        String dialect;

        @Option(
                names = "--prefix",
                defaultValue = TablePrefix.DEFAULT,
                description = "table name prefix (default: ${DEFAULT-VALUE})")
        String prefix;

        @Override
        public Integer call() throws SQLException {
            String p = SchemaCommand.prefix(prefix);
            Dialect wanted = dialect == null ? null : SchemaCommand.dialect(dialect);
            try (HikariDataSource ds = Databases.open(url, 1)) {
                Dialect actual;
                try (Connection c = ds.getConnection()) {
                    actual = Dialects.detect(c);
                }
                if (wanted != null && !wanted.name().equals(actual.name())) {
                    throw Failure.usage("--dialect " + dialect + " does not match the database at " + url
                            + ", which is " + actual.name() + "; drop --dialect or point --url at a " + wanted.name()
                            + " database");
                }
                int applied;
                try {
                    applied = Schema.migrate(ds, p);
                } catch (OnceException e) {
                    throw Failure.failed(e.getMessage(), e);
                }
                List<Schema.Migration> all = Schema.migrations(actual, p);
                int version = all.isEmpty() ? 0 : all.get(all.size() - 1).version();
                spec.commandLine()
                        .getOut()
                        .println(
                                applied == 0
                                        ? "schema " + p + "* is up to date (version " + version + ", " + actual.name()
                                                + ")"
                                        : "applied " + applied + " migration" + (applied == 1 ? "" : "s") + "; schema "
                                                + p + "* is now at version " + version + " (" + actual.name() + ")");
                return 0;
            }
        }
    }
}
