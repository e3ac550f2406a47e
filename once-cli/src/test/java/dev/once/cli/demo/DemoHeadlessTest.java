package dev.once.cli.demo;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code once demo --headless --chaos}: every fault hits both lanes for real; the printed table
 * must show the naive lane over-counting and the once lane counting every payment exactly once.
 */
class DemoHeadlessTest {

    private static final Pattern ROW =
            Pattern.compile("(?m)^(overcount|in ledger|card charges)\\s+\\$?([\\d,]+)\\s+\\$?([\\d,]+)\\s*$");

    @Test
    void chaosMakesTheNaiveLaneOvercountAndTheOnceLaneCountEachPaymentOnce() throws Exception {
        String schema = DemoSchemas.name("headless");
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = dev.once.cli.Main.run(
                new PrintWriter(out),
                new PrintWriter(err),
                "demo",
                "--headless",
                "--events",
                "6",
                "--chaos",
                "--seed",
                "7",
                "--postgres",
                TestPostgres.shared().jdbcUrl(),
                "--kafka",
                TestKafka.shared().bootstrapServers(),
                "--schema",
                schema);
        DemoSchemas.drop(schema);
        String printed = out + "\n--- err:\n" + err;

        assertThat(code).as(printed).isZero();
        assertThat(err.toString()).as("progress bar").contains("[##############################] 6/6 payments");
        assertThat(out.toString()).as(printed).contains("charged $120 (6 payments of $20)");
        long[] overcount = row(out.toString(), "overcount");
        long[] ledger = row(out.toString(), "in ledger");
        long[] charges = row(out.toString(), "card charges");
        assertThat(overcount[0])
                .as("naive overcount, every fault duplicates a $20 payment at least once:\n" + printed)
                .isGreaterThanOrEqualTo(4 * 20);
        assertThat(overcount[1]).as("once overcount:\n" + printed).isZero();
        assertThat(ledger[1])
                .as("once ledger holds each payment once:\n" + printed)
                .isEqualTo(120);
        assertThat(ledger[0]).as("naive ledger:\n" + printed).isEqualTo(120 + overcount[0]);
        assertThat(charges[1])
                .as("the provider charged the once lane once per payment:\n" + printed)
                .isEqualTo(6);
        assertThat(charges[0])
                .as("the naive lane was charged for every delivery:\n" + printed)
                .isGreaterThan(6);
        assertThat(out.toString()).contains("once counted every payment exactly once");
    }

    @Test
    void planGivesEveryFaultAtLeastOnceUnderChaosAndNoneWithout() {
        List<Demo.Action> chaos = Headless.plan(5, true, 1);
        assertThat(chaos)
                .hasSize(5)
                .contains(Demo.Action.DOUBLE_PUBLISH, Demo.Action.CRASH, Demo.Action.REBALANCE, Demo.Action.CONCURRENT);
        assertThat(Headless.plan(5, false, 1)).containsOnly(Demo.Action.DELIVER);
        assertThat(Headless.plan(40, true, 3)).isEqualTo(Headless.plan(40, true, 3));
    }

    @Test
    void anUnreachablePostgresABadKafkaAddressOrABusyPortIsNamed() throws Exception {
        int closedPort;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            closedPort = s.getLocalPort();
        }
        String unreachable = "jdbc:postgresql://127.0.0.1:" + closedPort + "/nowhere?user=postgres";
        StringWriter err = new StringWriter();
        int code = dev.once.cli.Main.run(
                new PrintWriter(new StringWriter()),
                new PrintWriter(err),
                "demo",
                "--headless",
                "--postgres",
                unreachable,
                "--kafka",
                "127.0.0.1:9092");
        assertThat(code).as(err.toString()).isEqualTo(dev.once.cli.internal.ExitCodes.FAILURE);
        assertThat(err.toString())
                .contains("cannot use PostgreSQL at " + unreachable)
                .contains("drop --postgres");

        StringWriter bad = new StringWriter();
        code = dev.once.cli.Main.run(
                new PrintWriter(new StringWriter()), new PrintWriter(bad), "demo", "--kafka", "kafka-one");
        assertThat(code).isEqualTo(dev.once.cli.internal.ExitCodes.USAGE);
        assertThat(bad.toString()).contains("--kafka 'kafka-one' is not HOST:PORT");

        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            StringWriter busy = new StringWriter();
            code = dev.once.cli.Main.run(
                    new PrintWriter(new StringWriter()),
                    new PrintWriter(busy),
                    "demo",
                    "--port",
                    String.valueOf(taken.getLocalPort()));
            assertThat(code).isEqualTo(dev.once.cli.internal.ExitCodes.USAGE);
            assertThat(busy.toString())
                    .contains("--port " + taken.getLocalPort() + " is in use on localhost")
                    .contains("--port 0");
        }
    }

    private static long[] row(String table, String name) {
        Matcher m = ROW.matcher(table);
        while (m.find()) {
            if (m.group(1).equals(name)) {
                return new long[] {
                    Long.parseLong(m.group(2).replace(",", "")),
                    Long.parseLong(m.group(3).replace(",", ""))
                };
            }
        }
        throw new AssertionError("no row '" + name + "' in the table:\n" + table);
    }
}
