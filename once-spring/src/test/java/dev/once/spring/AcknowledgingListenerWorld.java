package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.spring.SpringScopes.Ended;
import dev.once.spring.SpringScopes.Kind;
import dev.once.testsupport.TestDatabase;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import net.jqwik.api.state.ActionChain;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * The world of a generator that calls an acknowledging {@code @IdempotentListener} in the caller's Spring scopes
 * ({@link RabbitChannelCallerTransactionPropertyTest}, {@link PubSubCallerTransactionPropertyTest}, {@link
 * SqsAcknowledgementCallerTransactionPropertyTest}): the scopes
 * ({@link SpringScopes}), the messages handed to the listener and every settlement once sent for each, which events
 * committed, and the invariants checked when the outermost transaction a call ran in ends. A subclass brings the
 * broker: it receives a real message, calls the listener with it (between {@link #handed} and the call, {@link
 * #calledIn} names the transaction), and records each settlement on the message's {@link Handed}.
 *
 * <p>The oracle is the database (the inbox row of the event's claim, the ledger row of its effect), read on a
 * connection of its own: every message handed is settled exactly once by the time the transactions it was called in
 * ended (none left waiting), or at most once where the broker has no nack ({@link Settling#AT_MOST_ONCE}: SQS, whose
 * message not deleted comes back when its visibility timeout runs out); a message acknowledged finds its event's claim
 * committed (else it is lost); an event whose claim committed has one of its messages acknowledged (copies included: a duplicate is acknowledged, not left); an
 * effect is in the ledger once where its claim committed and absent where it did not (never applied twice).
 */
abstract class AcknowledgingListenerWorld {

    /** How many settlements a message handed to the listener has by the time its transactions ended. */
    enum Settling {
        /** Exactly one, an ack or a nack (RabbitMQ, Pub/Sub): a message left unsettled waits until its channel closes. */
        EXACTLY_ONCE,
        /**
         * At most one, a delete (SQS, which has no nack): a message not deleted comes back when its visibility timeout
         * runs out, which is how a rolled-back call gives it back; one deleted twice was deleted once too many.
         */
        AT_MOST_ONCE
    }

    /** One message handed to the listener, and the settlements once sent for it on the broker, in order. */
    static class Handed {
        final String eventId;
        final String label;
        final String kind;
        final List<String> settled = new ArrayList<>();
        // the outermost transaction this call ran in has ended: checked by now
        boolean ended;

        /** {@code label}: how the message names itself on the broker (a delivery tag), shown in moves. */
        Handed(String eventId, String label, String kind) {
            this.eventId = eventId;
            this.label = label;
            this.kind = kind;
        }

        void ack() {
            settled.add("ack");
        }

        void nack() {
            settled.add("nack");
        }

        boolean acked() {
            return settled.contains("ack");
        }

        @Override
        public String toString() {
            return kind + " " + eventId + " " + label + " " + settled;
        }
    }

    final SpringScopes scopes;
    final List<String> moves = new ArrayList<>();
    final List<Handed> handed = new ArrayList<>();
    // event id -> the physical transaction whose open claim it may hold (copies in the same one only; 0: the call's
    // own transaction, ended when the call returned)
    final Map<String, Integer> openIn = new LinkedHashMap<>();
    final List<String> committedEvents = new ArrayList<>();
    private final TestDatabase db;
    private final String consumer;
    private final Settling settling;

    AcknowledgingListenerWorld(PlatformTransactionManager tm, TestDatabase db, String consumer) {
        this(tm, db, consumer, Settling.EXACTLY_ONCE);
    }

    AcknowledgingListenerWorld(PlatformTransactionManager tm, TestDatabase db, String consumer, Settling settling) {
        this.scopes = new SpringScopes(tm);
        this.db = db;
        this.consumer = consumer;
        this.settling = settling;
    }

    boolean savepointAllowed() {
        // Spring refuses a savepoint in a transaction already marked rollback-only
        return scopes.isEmpty() || !scopes.top().status.isRollbackOnly();
    }

    void begin(Kind kind) {
        moves.add("begin " + kind);
        try {
            scopes.begin(kind);
        } catch (RuntimeException e) {
            // a savepoint in a transaction PostgreSQL has aborted (a body swallowed a failed statement)
            moves.add("  begin threw " + e.getClass().getSimpleName());
        }
    }

    /** An event applied in an ended transaction, or claimed in the open physical one. */
    String copyable() {
        int current = scopes.isEmpty() ? -1 : scopes.top().physical.number;
        for (Map.Entry<String, Integer> e : openIn.entrySet()) {
            if (e.getValue() == current && moves.size() % 2 == 0 && copyableHere(e.getKey())) {
                return e.getKey();
            }
        }
        for (int i = committedEvents.size() - 1; i >= 0; i--) {
            if (copyableHere(committedEvents.get(i))) {
                return committedEvents.get(i);
            }
        }
        return null;
    }

    /** Whether {@link #copyable} may pick event {@code id}. */
    boolean copyableHere(String id) {
        return true;
    }

    /** A message received for a listener call: recorded, and named in the moves. */
    Handed handed(Handed h) {
        handed.add(h);
        moves.add("listen " + h);
        return h;
    }

    /**
     * The call of {@code eventId} is about to run in the innermost scope's physical transaction, or in one of its
     * own (0) where no scope is open: checked when that transaction ends ({@link #callReturned} for its own).
     */
    void calledIn(String eventId) {
        openIn.putIfAbsent(eventId, scopes.isEmpty() ? 0 : scopes.top().physical.number);
    }

    /** After a call: one that ran in a transaction of its own has ended it, and is checked now. */
    void callReturned() {
        if (scopes.isEmpty()) {
            ended(0);
        }
    }

    void setRollbackOnly() {
        moves.add("setRollbackOnly");
        scopes.setRollbackOnly();
    }

    void commit() {
        moves.add("commit");
        ended(scopes.commit(), "commit");
    }

    void rollback() {
        moves.add("rollback");
        ended(scopes.rollback(), "rollback");
    }

    private void ended(Ended ended, String move) {
        if (ended.thrown() != null) {
            moves.add("  " + move + " threw " + ended.thrown().getClass().getSimpleName());
        }
        if (ended.physical()) {
            ended(ended.scope().physical.number);
        }
        scopeEnded(ended);
    }

    /** What a subclass adds when a scope ended (its items, the physical transaction's end), after the checks. */
    void scopeEnded(Ended ended) {}

    /**
     * Whether event {@code id}, committed, may have none of its messages acknowledged yet: a subclass's broker gives
     * them back (an SQS FIFO batch whose other group failed: the container deletes none of it).
     */
    boolean leftForRedrive(String id) {
        return false;
    }

    /** After the outermost scope of a physical transaction ended: checks every call made in it. */
    private void ended(int physical) {
        List<String> events = new ArrayList<>();
        openIn.entrySet().removeIf(e -> {
            if (e.getValue() == physical) {
                events.add(e.getKey());
                return true;
            }
            return false;
        });
        for (String id : events) {
            if (claimed(id)) {
                committedEvents.add(id);
            }
        }
        check(events);
    }

    boolean claimed(String id) {
        return count("SELECT count(*) FROM once_inbox WHERE consumer = ? AND event_id = ?", consumer, id) == 1;
    }

    long ledger(String id) {
        return count("SELECT count(*) FROM ledger WHERE event_id = ?", id);
    }

    /** On a connection of its own: a suspended outer transaction may be the thread's again, and aborted. */
    long count(String sql, String... args) {
        try (java.sql.Connection c = db.dataSource().getConnection();
                java.sql.PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setString(i + 1, args[i]);
            }
            try (java.sql.ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        } catch (java.sql.SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The invariants for the messages of {@code events} (their transaction has ended). */
    private void check(List<String> events) {
        for (Handed h : handed) {
            if (!events.contains(h.eventId) || h.ended) {
                continue;
            }
            h.ended = true;
            boolean claimed = claimed(h.eventId);
            assertThat(ledger(h.eventId))
                    .as("effect of %s in the ledger once where its claim committed, else absent: %s", h, moves)
                    .isEqualTo(claimed ? 1 : 0);
            if (settling == Settling.EXACTLY_ONCE) {
                assertThat(h.settled)
                        .as("%s settled exactly once when its transactions ended: %s", h, moves)
                        .hasSize(1);
            } else {
                assertThat(h.settled)
                        .as("%s deleted at most once: %s", h, moves)
                        .hasSizeLessThanOrEqualTo(1);
            }
            if (h.acked()) {
                assertThat(claimed)
                        .as("%s acknowledged: its claim must have committed (else the message is lost): %s", h, moves)
                        .isTrue();
            }
            checkSettled(h, claimed);
        }
        for (String id : events) {
            if (claimed(id) && !leftForRedrive(id)) {
                assertThat(handed.stream().filter(h -> h.eventId.equals(id)).anyMatch(Handed::acked))
                        .as("event %s committed: one of its messages acknowledged: %s", id, moves)
                        .isTrue();
            }
        }
    }

    /** What a broker adds to the invariants for {@code h}, settled once by now; its event's claim committed or not. */
    void checkSettled(Handed h, boolean claimed) {}

    /** Ends every open scope (a chain may stop anywhere) and checks what is left. */
    void end() {
        while (!scopes.isEmpty()) {
            rollback();
        }
        for (Handed h : handed) {
            assertThat(h.ended).as("%s checked: %s", h, moves).isTrue();
        }
    }

    /** Gives back what the world holds on its broker (a chain may stop anywhere); a subclass's broker says what. */
    void close() throws Exception {}

    /** Runs a generated chain that starts from {@code first}, checks what it left and closes it: its move count. */
    static <W extends AcknowledgingListenerWorld> int run(W first, ActionChain<W> chain) throws Exception {
        try {
            W w = chain.run();
            w.end();
            return w.moves.size();
        } finally {
            first.close();
        }
    }

    /** Makes the scripted {@code moves} on {@code w}, checks what they left and closes it. */
    static <W extends AcknowledgingListenerWorld> void scripted(W w, Consumer<W> moves) throws Exception {
        try {
            moves.accept(w);
            w.end();
        } finally {
            w.close();
        }
    }
}
