package dev.once.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Schema;
import dev.once.cli.internal.ExitCodes;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.net.ServerSocket;
import java.net.URI;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/** {@code once schema|doctor|prune} against a real PostgreSQL, each test in a schema of its own. */
class CommandsTest {

    private TestDatabase db;
    private String url;

    @BeforeEach
    void freshDatabase() {
        db = TestPostgres.shared().freshDatabase(2);
        String base = TestPostgres.shared().jdbcUrl();
        url = base + (base.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
    }

    @AfterEach
    void dropDatabase() {
        db.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "demo", "schema", "schema print", "schema migrate", "doctor", "prune"})
    void everyCommandHasHelp(String command) {
        String[] args = (command + " --help").strip().split(" ");
        Cli r = Cli.run(args);
        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .as(r.toString())
                .contains("Usage: once" + (command.isEmpty() ? "" : " " + command))
                .contains("--help");
    }

    @Test
    void schemaPrintWritesTheWholeScriptOfTheDialect() {
        Cli r = Cli.run("schema", "print", "--dialect", "postgres", "--prefix", "acme_");
        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .contains("CREATE TABLE acme_inbox")
                .contains("CREATE TABLE acme_outbox")
                .contains("PRIMARY KEY (consumer, message_id)")
                .contains("RENAME COLUMN message_id TO event_id");
        Cli maria = Cli.run("schema", "print", "--dialect", "mariadb");
        assertThat(maria.exitCode()).as(maria.toString()).isZero();
        assertThat(maria.out()).contains("once_inbox");
    }

    @Test
    void schemaPrintNamesAnUnknownDialect() {
        Cli r = Cli.run("schema", "print", "--dialect", "oracle");
        assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(r.err()).contains("'oracle'").contains("expected postgres or mariadb");
    }

    @Test
    void schemaMigrateAppliesOnceThenIsUpToDate() {
        Cli first = Cli.run("schema", "migrate", "--dialect", "postgres", "--url", url, "--prefix", "m_");
        assertThat(first.exitCode()).as(first.toString()).isZero();
        List<Schema.Migration> shipped = Schema.migrations(Dialects.POSTGRESQL, "m_");
        int latest = shipped.get(shipped.size() - 1).version();
        assertThat(first.out())
                .contains("applied " + shipped.size() + " migration")
                .contains("now at version " + latest + " (postgresql)");
        assertThat(db.queryLong("SELECT count(*) FROM m_inbox")).isZero();

        Cli again = Cli.run("schema", "migrate", "--url", url, "--prefix", "m_");
        assertThat(again.exitCode()).as(again.toString()).isZero();
        assertThat(again.out()).contains("schema m_* is up to date (version " + latest + ", postgresql)");
    }

    @Test
    void schemaMigrateRefusesADialectThatIsNotTheDatabases() {
        Cli r = Cli.run("schema", "migrate", "--dialect", "mariadb", "--url", url);
        assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(r.err()).contains("--dialect mariadb does not match").contains("postgresql");
    }

    @Test
    void anUnreachableUrlIsNamedWithWhatToCheck() throws Exception {
        int closedPort;
        try (ServerSocket s = new ServerSocket(0)) {
            closedPort = s.getLocalPort();
        }
        String unreachable = "jdbc:postgresql://127.0.0.1:" + closedPort + "/nowhere?user=postgres&connectTimeout=2";
        for (String[] args : new String[][] {
            {"schema", "migrate", "--url", unreachable},
            {"doctor", "--url", unreachable},
            {"prune", "--url", unreachable, "--retention", "7d"}
        }) {
            Cli r = Cli.run(args);
            assertThat(r.exitCode()).as(r.toString()).isEqualTo(ExitCodes.FAILURE);
            assertThat(r.err())
                    .as(r.toString())
                    .contains("cannot connect to " + unreachable)
                    .contains("check that the database is running")
                    .doesNotContain("\tat ");
        }
    }

    @Test
    void aUrlThatIsNotJdbcSaysWhatIsExpected() {
        Cli r = Cli.run("doctor", "--url", "postgres://app@127.0.0.1/app");
        assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(r.err()).contains("'postgres://app@127.0.0.1/app'").contains("jdbc:postgresql://");
    }

    @Test
    void doctorFindsDuplicateBusinessKeysAndExitsNonZero() {
        db.execute(
                "CREATE TABLE shipments (id serial PRIMARY KEY, order_id varchar(20) NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
                "INSERT INTO shipments (order_id) VALUES ('order-1'), ('order-2'), ('order-2'), ('order-7'), ('order-7'), ('order-7')",
                "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES"
                        + " ('billing', 'e-1', now() - interval '10 days'), ('billing', 'e-2', now() - interval '9 days'),"
                        + " ('billing', 'e-3', now()), ('shipping', 'e-1', now())",
                "INSERT INTO once_outbox (event_id, destination, payload, headers, idempotency_key, status, available_at, created_at) VALUES"
                        + " ('e-1', 'https://pay.example/charges', '', '', 'charge:1', 'pending', now(), now() - interval '3 hours'),"
                        + " ('e-2', 'https://pay.example/charges', '', '', 'charge:2', 'dead', now(), now()),"
                        + " ('e-3', 'https://pay.example/charges', '', '', 'charge:3', 'sent', now(), now())");

        Cli r = Cli.run("doctor", "--url", url, "--table", "shipments", "--key", "order_id", "--retention", "7d");

        assertThat(r.exitCode()).as(r.toString()).isEqualTo(ExitCodes.FINDINGS);
        assertThat(r.out())
                .as(r.toString())
                .contains(
                        "duplicate business keys   FAIL  2 keys in shipments by order_id appear more than once (3 surplus rows)")
                .contains("order-7 | 3")
                .contains("order-2 | 2")
                .doesNotContain("order-1 |")
                .contains("inbox                     OK    4 processed event ids")
                .contains("billing: 3")
                .contains("past the retention of 7d: 2 rows can go")
                .contains("outbox backlog            OK    1 pending, oldest 3h old")
                .contains("outbox dead messages      WARN  1 message gave up")
                .contains("#2 https://pay.example/charges key charge:2: no error recorded")
                .contains("result: DUPLICATES FOUND");
    }

    @Test
    void doctorWarnsWhenKafkaCanReplayRecordsOlderThanTheInboxRetention() {
        dev.once.testkit.kafka.TestKafka kafka = dev.once.testkit.kafka.TestKafka.shared();
        String weekly = kafka.createTopic("doctor-weekly", 1); // the broker default: 7 days
        String daily = "doctor-daily-" + System.nanoTime();
        kafka.createTopic(daily, 1, Map.of("retention.ms", Long.toString(86_400_000L)));

        Cli r = Cli.run(
                "doctor",
                "--url",
                url,
                "--retention",
                "7d",
                "--kafka",
                kafka.bootstrapServers(),
                "--topic",
                weekly + "," + daily);

        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .as(r.toString())
                .contains("offsets.retention.minutes is 10080 (7d)")
                .contains("WARN  topic " + weekly + " keeps records 7d, not less than the inbox retention of 7d")
                .contains("make the inbox retention (InboxPruner, --retention) longer than 7d")
                .contains("OK    topic " + daily + " keeps records 1d, less than the inbox retention of 7d");
        Cli longer = Cli.run(
                "doctor", "--url", url, "--retention", "8d", "--kafka", kafka.bootstrapServers(), "--topic", weekly);
        assertThat(longer.out()).as(longer.toString()).contains("OK    topic " + weekly + " keeps records 7d");
        assertThat(Cli.run("doctor", "--url", url, "--kafka", kafka.bootstrapServers())
                        .err())
                .contains("--kafka and --topic go together");
    }

    @Test
    void doctorWarnsWhenSqsCanRedeliverAMessageLaterThanTheInboxRetention() {
        SQSRestServer server = SQSRestServerBuilder.withInterface("127.0.0.1")
                .withDynamicPort()
                .start();
        String endpoint =
                "http://127.0.0.1:" + server.waitUntilStarted().localAddress().getPort();
        // the AWS SDK's default chain, as the command uses it; any credentials do for ElasticMQ
        Map<String, String> props =
                Map.of("aws.region", "us-east-1", "aws.accessKeyId", "x", "aws.secretAccessKey", "x");
        props.forEach(System::setProperty);
        try (SqsClient sqs =
                SqsClient.builder().endpointOverride(URI.create(endpoint)).build()) {
            String plain = queue(sqs, "plain", "345600", null); // SQS's default: 4 days
            String dlq = queue(sqs, "orders-dlq", "1209600", null); // 14 days, as AWS advises for a DLQ
            String dlqArn = sqs.getQueueAttributes(r -> r.queueUrl(dlq).attributeNames(QueueAttributeName.QUEUE_ARN))
                    .attributes()
                    .get(QueueAttributeName.QUEUE_ARN);
            String orders = queue(
                    sqs, "orders", "345600", "{\"deadLetterTargetArn\":\"" + dlqArn + "\",\"maxReceiveCount\":\"5\"}");

            Cli r = Cli.run("doctor", "--url", url, "--sqs", plain + "," + orders, "--sqs-endpoint", endpoint);

            // ElasticMQ keeps messages until deleted and reports no MessageRetentionPeriod: SQS's 14 d
            // maximum is assumed (SqsHorizonTest checks the arithmetic with AWS's own figures)
            assertThat(r.exitCode()).as(r.toString()).isZero();
            assertThat(r.out())
                    .as(r.toString())
                    .contains("sqs redelivery horizon    WARN  queue plain keeps messages 14d (assumed, SQS's maximum:"
                            + " the endpoint reports no MessageRetentionPeriod), no redrive policy: not less than the"
                            + " inbox retention of 7d")
                    .contains("WARN  queue orders keeps messages 14d (assumed")
                    .contains("its dead-letter queue orders-dlq 14d (assumed")
                    .contains("(maxReceiveCount 5)")
                    .contains("can be delivered up to 28d after it was sent, not less than the inbox retention of 7d")
                    .contains("make the inbox retention (InboxPruner, --retention) longer than 28d");
            Cli longer = Cli.run(
                    "doctor",
                    "--url",
                    url,
                    "--retention",
                    "29d",
                    "--sqs",
                    plain + "," + orders,
                    "--sqs-endpoint",
                    endpoint);
            assertThat(longer.out())
                    .as(longer.toString())
                    .contains("OK    queue plain keeps messages 14d")
                    .contains("OK    queue orders keeps messages 14d")
                    .contains("less than the inbox retention of 29d")
                    .doesNotContain("WARN");
            assertThat(Cli.run("doctor", "--url", url, "--sqs-endpoint", endpoint)
                            .err())
                    .contains("--sqs-endpoint needs --sqs");
        } finally {
            props.keySet().forEach(System::clearProperty);
            server.stopAndWait();
        }
    }

    private static String queue(SqsClient sqs, String name, String retentionSeconds, String redrive) {
        Map<QueueAttributeName, String> a = new HashMap<>();
        a.put(QueueAttributeName.MESSAGE_RETENTION_PERIOD, retentionSeconds);
        if (redrive != null) {
            a.put(QueueAttributeName.REDRIVE_POLICY, redrive);
        }
        return sqs.createQueue(r -> r.queueName(name).attributes(a)).queueUrl();
    }

    @Test
    void doctorPassesAHealthyDatabase() {
        db.execute(
                "CREATE TABLE shipments (order_id varchar(20) PRIMARY KEY)",
                "INSERT INTO shipments VALUES ('order-1'), ('order-2')",
                "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES ('billing', 'e-1', now())");

        Cli r = Cli.run("doctor", "--url", url, "--table", "shipments", "--key", "order_id");

        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .contains("duplicate business keys   OK    none in shipments by order_id")
                .contains("within the retention of 7d")
                .contains("outbox dead messages      OK    none")
                .contains("result: no duplicates found");
    }

    @Test
    void doctorRefusesUnsafeOrIncompleteTableOptions() {
        Cli injected = Cli.run("doctor", "--url", url, "--table", "shipments; drop table x", "--key", "order_id");
        assertThat(injected.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(injected.err()).contains("--table 'shipments; drop table x' is not a plain identifier");

        Cli alone = Cli.run("doctor", "--url", url, "--table", "shipments");
        assertThat(alone.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(alone.err()).contains("--table and --key go together");

        Cli missing = Cli.run("doctor", "--url", url, "--table", "no_such_table", "--key", "order_id");
        assertThat(missing.exitCode()).isEqualTo(ExitCodes.FAILURE);
        assertThat(missing.err())
                .contains("cannot check --table no_such_table --key order_id")
                .contains("no_such_table");
    }

    @Test
    void pruneDeletesOnlyRowsPastTheRetention() {
        db.execute("INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES"
                + " ('billing', 'old-1', now() - interval '8 days'), ('billing', 'old-2', now() - interval '30 days'),"
                + " ('billing', 'new-1', now() - interval '6 days'), ('billing', 'new-2', now())");

        Cli r = Cli.run("prune", "--url", url, "--retention", "7d");

        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out()).contains("pruned 2 inbox rows processed before").contains("(retention 7d)");
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id LIKE 'new-%'"))
                .isEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(2);
    }

    @Test
    void pruneAlsoDeletesTheStreamPositionsThatDidNotMoveWithinTheStreamRetention() {
        db.execute(
                "INSERT INTO once_stream_position (consumer, stream, position, moved_at) VALUES"
                        + " ('fifo', 'quiet', 1, now() - interval '16 days'), ('fifo', 'moving', 2, now() - interval '14 days')");

        Cli r = Cli.run("prune", "--url", url, "--retention", "7d");
        assertThat(r.exitCode()).as(r.toString()).isZero();
        assertThat(r.out())
                .contains("pruned 0 inbox rows processed before")
                .contains("pruned 1 stream position last moved before")
                .contains("(retention 15d)");
        assertThat(db.queryLong("SELECT position FROM once_stream_position")).isEqualTo(2);

        Cli shorter = Cli.run("prune", "--url", url, "--retention", "7d", "--stream-retention", "13d");
        assertThat(shorter.exitCode()).as(shorter.toString()).isZero();
        assertThat(shorter.out())
                .contains("pruned 1 stream position last moved before")
                .contains("(retention 13d)");
        assertThat(db.queryLong("SELECT count(*) FROM once_stream_position")).isZero();

        Cli refused = Cli.run("prune", "--url", url, "--retention", "7d", "--stream-retention", "30s");
        assertThat(refused.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(refused.err())
                .contains("retention must be at least 1 minute, but was PT30S")
                .contains("after its successors");
    }

    @Test
    void pruneRefusesARetentionShorterThanTheRedeliveryHorizonUnlessItIsStated() {
        db.execute(
                "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES ('billing', 'old', now() - interval '2 days')");

        Cli refused = Cli.run("prune", "--url", url, "--retention", "1d");
        assertThat(refused.exitCode()).isEqualTo(ExitCodes.USAGE);
        assertThat(refused.err())
                .contains("shorter than the redelivery horizon")
                .contains("--redelivery-horizon");
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(1);

        Cli stated = Cli.run("prune", "--url", url, "--retention", "PT24H", "--redelivery-horizon", "1d");
        assertThat(stated.exitCode()).as(stated.toString()).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
    }

    @ParameterizedTest
    @ValueSource(strings = {"7x", "seven days", "0d", "-1d", "P7", ""})
    void aBadDurationNamesTheValueAndTheExpectedForm(String bad) {
        Cli r = Cli.run("prune", "--url", url, "--retention", bad);
        assertThat(r.exitCode()).as(r.toString()).isEqualTo(ExitCodes.USAGE);
        assertThat(r.err())
                .contains("'" + bad + "' is not a duration: expected a positive whole number followed by d, h, m or s");
    }
}
