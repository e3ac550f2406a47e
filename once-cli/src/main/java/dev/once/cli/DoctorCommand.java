package dev.once.cli;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.OnceException;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.DoctorQueries;
import dev.once.cli.internal.Durations;
import dev.once.cli.internal.ExitCodes;
import dev.once.cli.internal.Failure;
import dev.once.cli.internal.KafkaHorizon;
import dev.once.cli.internal.SqsHorizon;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxStats;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import javax.sql.DataSource;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code once doctor}: the checks seed 000 asks for, in one readable report. Duplicate business
 * keys in a user table make the exit status {@value ExitCodes#FINDINGS}; everything else is
 * reported as OK or WARN and leaves it 0.
 */
@Command(
        name = "doctor",
        mixinStandardHelpOptions = true,
        description = {
            "Check a database for the signs of duplicate processing.",
            "%nDuplicate business keys in a table of yours, inbox size and age against the retention, outbox backlog"
                    + " and dead messages, and (with --kafka or --sqs) the inbox retention against what the broker can"
                    + " deliver again. Exit status "
                    + ExitCodes.FINDINGS
                    + " when duplicate business keys are found, "
                    + ExitCodes.USAGE + " for bad arguments, " + ExitCodes.FAILURE
                    + " when the database cannot be read.%n"
        })
final class DoctorCommand implements Callable<Integer> {

    /** How many dead outbox messages the report lists. */
    static final int DEAD_LISTED = 5;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--url", required = true, description = Databases.EXPECTED_URL)
    String url;

    @Option(
            names = "--table",
            description = "a table of yours whose rows should be unique per business key, e.g. shipments")
    String table;

    @Option(names = "--key", split = ",", description = "the business key column(s) of --table, e.g. order_id")
    List<String> key;

    @Option(
            names = "--retention",
            converter = Durations.class,
            defaultValue = "7d",
            description = "the inbox retention you prune with (default: ${DEFAULT-VALUE})")
    Duration retention;

    @Option(
            names = "--kafka",
            description = "bootstrap servers of your Kafka cluster: check that the inbox retention outlasts what the"
                    + " broker can replay (offsets.retention.minutes, retention.ms of each --topic)")
    String kafka;

    @Option(names = "--topic", split = ",", description = "the topic(s) your consumers read, with --kafka")
    List<String> topics;

    @Option(
            names = "--sqs",
            split = ",",
            description = "URL(s) of the SQS queue(s) your consumers read: check that the inbox retention outlasts"
                    + " MessageRetentionPeriod and, with a redrive policy, the dead-letter queue's retention plus a"
                    + " redrive (region and credentials from the AWS SDK's default chain)")
    List<String> sqs;

    @Option(
            names = "--sqs-endpoint",
            description = "the SQS endpoint, for an SQS-compatible service (LocalStack, ElasticMQ); default: AWS's")
    String sqsEndpoint;

    @Option(
            names = "--prefix",
            defaultValue = TablePrefix.DEFAULT,
            description = "once table name prefix (default: ${DEFAULT-VALUE})")
    String prefix;

    @Override
    public Integer call() throws SQLException {
        if ((table == null) != (key == null || key.isEmpty())) {
            throw Failure.usage(
                    "--table and --key go together: give both (e.g. --table shipments --key order_id) or neither");
        }
        if (table != null) {
            checkIdentifier("--table", table);
            key.forEach(k -> checkIdentifier("--key", k));
        }
        if ((kafka == null) != (topics == null || topics.isEmpty())) {
            throw Failure.usage(
                    "--kafka and --topic go together: give both (e.g. --kafka localhost:9092 --topic orders)"
                            + " or neither");
        }
        if (sqsEndpoint != null && (sqs == null || sqs.isEmpty())) {
            throw Failure.usage("--sqs-endpoint needs --sqs with the queue URL(s) to check");
        }
        String p = SchemaCommand.prefix(prefix);
        PrintWriter out = spec.commandLine().getOut();
        boolean duplicates = false;
        // Two connections: the report's own, and one for OutboxAdmin while the first is held.
        try (HikariDataSource ds = Databases.open(url, 2);
                Connection c = ds.getConnection()) {
            Dialect dialect = Dialects.detect(c);
            out.println("once doctor: " + url + " (" + dialect.name() + ")");
            out.println();
            if (table != null) {
                duplicates = duplicateKeys(c, out);
            } else {
                out.println("duplicate business keys   SKIP  pass --table T --key K to check a table of yours");
            }
            out.println();
            String inbox = dialect.quote(p + "inbox");
            if (exists(c, p + "inbox")) {
                inbox(c, out, inbox);
            } else {
                out.println("inbox                     WARN  no table " + p
                        + "inbox here: run `once schema migrate --url …`" + " (or check --prefix)");
            }
            out.println();
            if (exists(c, p + "outbox")) {
                outbox(ds, dialect, out, p);
            } else {
                out.println("outbox                    WARN  no table " + p + "outbox here");
            }
        } catch (SQLException | OnceException e) {
            throw Failure.failed("a check failed on " + url + ": " + e.getMessage(), e);
        }
        if (kafka != null) {
            out.println();
            kafkaHorizon(out);
        }
        if (sqs != null && !sqs.isEmpty()) {
            out.println();
            sqsHorizon(out);
        }
        out.println();
        out.println(
                duplicates
                        ? "result: DUPLICATES FOUND (exit status " + ExitCodes.FINDINGS + ")"
                        : "result: no duplicates found");
        return duplicates ? ExitCodes.FINDINGS : ExitCodes.OK;
    }

    private boolean duplicateKeys(Connection c, PrintWriter out) throws SQLException {
        String where = table + " by " + String.join(", ", key);
        long keys;
        long surplus;
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(DoctorQueries.duplicateTotals(table, key))) {
            rs.next();
            keys = rs.getLong(1);
            surplus = rs.getLong(2);
        } catch (SQLException e) {
            throw Failure.failed(
                    "cannot check --table " + table + " --key " + String.join(",", key) + ": " + e.getMessage()
                            + " (check that the table and columns exist and are spelled as in your schema)",
                    e);
        }
        if (keys == 0) {
            out.println("duplicate business keys   OK    none in " + where);
            return false;
        }
        out.println("duplicate business keys   FAIL  " + keys + " key" + (keys == 1 ? "" : "s") + " in " + where
                + " appear more than once (" + surplus + " surplus row" + (surplus == 1 ? "" : "s") + ")");
        out.println("                                " + String.join(" | ", key) + " | copies");
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(DoctorQueries.duplicateKeys(table, key))) {
            int n = rs.getMetaData().getColumnCount();
            while (rs.next()) {
                List<String> row = new ArrayList<>();
                for (int i = 1; i <= n; i++) {
                    row.add(String.valueOf(rs.getObject(i)));
                }
                out.println("                                " + String.join(" | ", row));
            }
        }
        if (keys > DoctorQueries.DUPLICATES_LISTED) {
            out.println("                                … and " + (keys - DoctorQueries.DUPLICATES_LISTED) + " more");
        }
        out.println(
                "                                fix: claim the producer's event id in the same transaction as the write"
                        + " (IdempotentConsumer), then add a UNIQUE constraint on " + String.join(", ", key));
        return true;
    }

    private void inbox(Connection c, PrintWriter out, String inbox) throws SQLException {
        long rows;
        Instant oldest;
        Instant now;
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(DoctorQueries.inboxSummary(inbox))) {
            rs.next();
            rows = rs.getLong(1);
            oldest = instant(rs.getTimestamp(2));
            now = instant(rs.getTimestamp(3));
        }
        out.println("inbox                     OK    " + rows + " processed event id" + (rows == 1 ? "" : "s"));
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(DoctorQueries.inboxByConsumer(inbox))) {
            while (rs.next()) {
                out.println("                                " + rs.getString(1) + ": " + rs.getLong(2));
            }
        }
        if (oldest == null) {
            return;
        }
        Duration age = Duration.between(oldest, now);
        if (age.compareTo(retention) <= 0) {
            out.println("inbox retention           OK    oldest row is " + human(age) + " old, within the retention of "
                    + Durations.format(retention));
            return;
        }
        long expired;
        try (PreparedStatement ps = c.prepareStatement(DoctorQueries.inboxOlderThan(inbox))) {
            ps.setTimestamp(1, Timestamp.from(now.minus(retention))); // 1 cutoff
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                expired = rs.getLong(1);
            }
        }
        out.println("inbox retention           WARN  oldest row is " + human(age) + " old, past the retention of "
                + Durations.format(retention) + ": " + expired + " row" + (expired == 1 ? "" : "s")
                + " can go; run `once prune --url … --retention " + Durations.format(retention)
                + "` or schedule InboxPruner");
    }

    private void outbox(DataSource ds, Dialect dialect, PrintWriter out, String prefix) {
        OutboxAdmin admin = OutboxAdmin.builder()
                .dataSource(ds)
                .dialect(dialect)
                .tablePrefix(prefix)
                .build();
        OutboxStats stats = admin.stats();
        out.println("outbox backlog            OK    "
                + (stats.pending() == 0
                        ? "nothing pending"
                        : stats.pending() + " pending, oldest " + human(stats.oldestPendingAge())
                                + " old (is a relay running?)"));
        if (stats.dead() == 0) {
            out.println("outbox dead messages      OK    none");
            return;
        }
        out.println(
                "outbox dead messages      WARN  " + stats.dead() + " message" + (stats.dead() == 1 ? "" : "s")
                        + " gave up after the last retry (status 'dead'); after fixing the cause, replay them with OutboxAdmin.replay");
        for (DeadMessage d : admin.dead(0, DEAD_LISTED)) {
            out.println("                                #" + d.message().id() + " "
                    + d.message().destination() + " key " + d.message().idempotencyKey() + ": "
                    + (d.lastError() == null || d.lastError().isBlank() ? "no error recorded" : d.lastError()));
        }
        if (stats.dead() > DEAD_LISTED) {
            out.println("                                … and " + (stats.dead() - DEAD_LISTED) + " more");
        }
    }

    private void kafkaHorizon(PrintWriter out) {
        List<KafkaHorizon.Finding> findings;
        try {
            findings = KafkaHorizon.check(kafka, topics, retention);
        } catch (Exception e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            out.println("kafka redelivery horizon  WARN  cannot read the settings of " + kafka + ": " + e);
            return;
        }
        String head = "kafka redelivery horizon  ";
        for (KafkaHorizon.Finding f : findings) {
            out.println(head + (f.ok() ? "OK    " : "WARN  ") + f.text());
            head = "                          ";
        }
    }

    private void sqsHorizon(PrintWriter out) {
        List<SqsHorizon.Finding> findings;
        try {
            findings = SqsHorizon.check(sqsEndpoint, sqs, retention);
        } catch (RuntimeException e) {
            out.println("sqs redelivery horizon    WARN  cannot read the attributes of " + String.join(", ", sqs) + ": "
                    + e);
            return;
        }
        String head = "sqs redelivery horizon    ";
        for (SqsHorizon.Finding f : findings) {
            out.println(head + (f.ok() ? "OK    " : "WARN  ") + f.text());
            head = "                          ";
        }
    }

    private static void checkIdentifier(String option, String value) {
        if (!DoctorQueries.IDENTIFIER.matcher(value).matches()) {
            throw Failure.usage(option + " '" + value + "' is not a plain identifier; expected a name like shipments,"
                    + " app.shipments or order_id (letters, digits, _ and $, starting with a letter or _)");
        }
    }

    private static boolean exists(Connection c, String name) throws SQLException {
        DatabaseMetaData md = c.getMetaData();
        for (String candidate : Arrays.asList(name, name.toLowerCase(Locale.ROOT), name.toUpperCase(Locale.ROOT))) {
            try (ResultSet rs = md.getTables(c.getCatalog(), c.getSchema(), candidate, new String[] {"TABLE"})) {
                if (rs.next()) {
                    return true;
                }
            }
        }
        return false;
    }

    private static Instant instant(Timestamp t) {
        return t == null ? null : t.toInstant();
    }

    static String human(Duration d) {
        long s = d.getSeconds();
        if (s >= 2 * 86_400) {
            return s / 86_400 + "d";
        }
        if (s >= 2 * 3_600) {
            return s / 3_600 + "h";
        }
        if (s >= 120) {
            return s / 60 + "m";
        }
        return s + "s";
    }
}
