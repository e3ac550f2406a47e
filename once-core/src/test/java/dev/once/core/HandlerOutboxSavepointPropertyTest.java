package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * A handler's outbox rows against its savepoints, through the public API: random scripts of savepoint set,
 * outbox row added, rollback to a live savepoint, release, run by a per-event handler in a transaction the
 * engine owns or in a caller's ({@link ManualTransactions}), then committed. Savepoints are set on the
 * handler's connection, as SQL text on it ({@code SAVEPOINT s1}), or, in a caller's transaction, on the
 * caller's scope (announced to the engine through the joined transaction). The engine makes the
 * transaction's outbox buffer at the handler's first row, so a script that sets a savepoint first, adds rows
 * and rolls back to it crosses the point where the buffer is made (issue 21, helper springrec6). The oracle is
 * the script: the model keeps the rows the open transaction holds and each live savepoint's count of them;
 * what committed must be exactly those rows, in order, once each.
 */
class HandlerOutboxSavepointPropertyTest {

    private static TestDatabase postgres;
    private static TestDatabase mariadb;
    private static final AtomicInteger events = new AtomicInteger();

    @AfterContainer
    static void stop() {
        if (postgres != null) {
            postgres.close();
        }
        if (mariadb != null) {
            mariadb.close();
        }
    }

    enum Via {
        CONNECTION,
        SQL,
        SCOPE
    }

    /** One step of a handler's script; {@code at} picks a live savepoint (modulo their count). */
    record Step(String op, Via via, int at) {
        @Override
        public String toString() {
            return switch (op) {
                case "set" -> "set(" + via + ")";
                case "add" -> "add";
                default -> op + "(" + at + ")";
            };
        }
    }

    @Provide
    Arbitrary<List<Step>> scripts() {
        Arbitrary<Step> set = Arbitraries.of(Via.values()).map(v -> new Step("set", v, 0));
        Arbitrary<Step> add = Arbitraries.just(new Step("add", null, 0));
        Arbitrary<Integer> at = Arbitraries.integers().between(0, 4);
        Arbitrary<Step> rollback = at.map(i -> new Step("rollback", null, i));
        Arbitrary<Step> release = at.map(i -> new Step("release", null, i));
        Arbitrary<Step> step = Arbitraries.frequencyOf(
                Tuple.of(3, set), Tuple.of(4, add), Tuple.of(3, rollback), Tuple.of(1, release));
        return step.list().ofMinSize(1).ofMaxSize(14);
    }

    @Property(tries = 40)
    void postgres(@ForAll("scripts") List<Step> script, @ForAll boolean joined) throws Exception {
        if (postgres == null) {
            postgres = Ledger.on(TestPostgres.shared().freshDatabase(2));
        }
        run(postgres, Dialects.POSTGRESQL, script, joined);
    }

    @Property(tries = 20)
    @AddLifecycleHook(SkipWithoutMariaDb.class)
    void mariadb(@ForAll("scripts") List<Step> script, @ForAll boolean joined) throws Exception {
        if (mariadb == null) {
            mariadb = Ledger.on(TestMariaDb.shared().freshDatabase(2));
        }
        run(mariadb, Dialects.MARIADB, script, joined);
    }

    /** A live savepoint as the script set it: how to roll back to it, and how many rows stood before it. */
    private record Live(Via via, Savepoint jdbc, String name, int rowsBefore) {}

    private static void run(TestDatabase db, Dialect dialect, List<Step> script, boolean joined) throws Exception {
        String eventId = "evt-" + events.incrementAndGet();
        ManualTransactions manual = new ManualTransactions();
        ManualTransactions.Scope[] scope = new ManualTransactions.Scope[1];
        List<String> expected = new ArrayList<>();
        Handler handler = (d, tx) -> {
            expected.clear();
            List<Live> live = new ArrayList<>();
            Connection c = tx.connection();
            int n = 0;
            for (Step s : script) {
                switch (s.op()) {
                    case "set" -> {
                        Via via = s.via() == Via.SCOPE && !joined ? Via.CONNECTION : s.via();
                        String name = "s" + (++n);
                        Savepoint jdbc = null;
                        switch (via) {
                            case CONNECTION -> jdbc = c.setSavepoint();
                            case SCOPE -> jdbc = scope[0].setSavepoint();
                            case SQL -> sql(c, "SAVEPOINT " + name);
                        }
                        live.add(new Live(via, jdbc, name, expected.size()));
                    }
                    case "add" -> {
                        String payload = d.eventId() + "/" + (++n);
                        tx.outbox().add("mail", d.eventId(), payload.getBytes(StandardCharsets.UTF_8), null, null);
                        expected.add(payload);
                    }
                    case "rollback" -> {
                        if (!live.isEmpty()) {
                            int i = s.at() % live.size();
                            Live l = live.get(i);
                            switch (l.via()) {
                                case CONNECTION -> c.rollback(l.jdbc());
                                case SCOPE -> scope[0].rollback(l.jdbc());
                                case SQL -> sql(c, "ROLLBACK TO SAVEPOINT " + l.name());
                            }
                            live.subList(i + 1, live.size()).clear(); // it stays, later ones are gone
                            expected.subList(l.rowsBefore(), expected.size()).clear();
                        }
                    }
                    case "release" -> {
                        if (!live.isEmpty()) {
                            int i = s.at() % live.size();
                            Live l = live.get(i);
                            switch (l.via()) {
                                case CONNECTION -> c.releaseSavepoint(l.jdbc());
                                case SCOPE -> scope[0].releaseSavepoint(l.jdbc());
                                case SQL -> sql(c, "RELEASE SAVEPOINT " + l.name());
                            }
                            live.subList(i, live.size()).clear(); // it and every later one
                        }
                    }
                    default -> throw new IllegalStateException(s.op());
                }
            }
        };
        Delivery delivery = Delivery.of(eventId, "1");
        Outcome outcome;
        if (joined) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .transactions(manual)
                    .dialect(dialect)
                    .consumer("billing")
                    .handler(handler)
                    .build();
            try (Connection c = db.dataSource().getConnection()) {
                c.setAutoCommit(false);
                try (ManualTransactions.Scope tx = manual.join(c)) {
                    scope[0] = tx;
                    outcome = consumer.process(delivery);
                    tx.commit();
                }
                c.setAutoCommit(true);
            }
        } else {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler(handler)
                    .build();
            outcome = consumer.process(delivery);
        }
        assertThat(outcome.status()).as("%s: %s", script, outcome).isEqualTo(Status.APPLIED);
        assertThat(committedRows(db, eventId))
                .as(
                        "%s (%s): the rows standing when the handler returned, each once",
                        script, joined ? "joined" : "owned")
                .containsExactlyElementsOf(expected);
    }

    private static void sql(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    private static List<String> committedRows(TestDatabase db, String key) throws SQLException {
        List<String> rows = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps =
                        c.prepareStatement("SELECT payload FROM once_outbox WHERE msg_key = ? ORDER BY id")) {
            ps.setString(1, key);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    rows.add(new String(rs.getBytes(1), StandardCharsets.UTF_8));
                }
            }
        }
        return rows;
    }
}
