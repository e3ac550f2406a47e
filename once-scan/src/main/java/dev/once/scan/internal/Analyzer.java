package dev.once.scan.internal;

import com.github.javaparser.StaticJavaParser;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.MethodCallExpr;
import dev.once.scan.Blast;
import dev.once.scan.Consumer;
import dev.once.scan.Finding;
import dev.once.scan.Level;
import dev.once.scan.Location;
import dev.once.scan.Related;
import dev.once.scan.Rule;
import dev.once.scan.Scoring;
import dev.once.scan.Step;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/** Turns the traced flow of one entry point into findings and a score. */
final class Analyzer {

    /** The verdict on one entry point. */
    record Result(Consumer consumer, List<Finding> findings) {}

    private static final Set<String> LEASED =
            Set.of("kafka", "sqs", "lambda", "nats", "stream", "eventuate", "camel", "axon");

    Result analyze(Entry e, List<Event> events, Map<Event, List<Event>> finallyAcks) {
        List<Finding> out = new ArrayList<>();
        List<Event> effects = of(events, Event.Kind.EFFECT);
        List<Event> acks = of(events, Event.Kind.ACK);
        List<Event> guards = of(events, Event.Kind.GUARD);
        List<Event> checks = events.stream()
                .filter(x -> x.kind() == Event.Kind.CHECK || x.kind() == Event.Kind.LOOKUP)
                .toList();
        // a dedupe record written after an exists-check is the check-then-act race, not a claim, unless a
        // transaction holds it: then the second insert of the key fails and rolls back what that
        // transaction wrote, and the check is only a shortcut
        List<Event> claims = of(events, Event.Kind.CLAIM).stream()
                .filter(c -> c.tx() != null || checks.stream().noneMatch(k -> k.seq() < c.seq()))
                .toList();
        List<Event> onceCalls = of(events, Event.Kind.ONCE);
        boolean once = !onceCalls.isEmpty();
        boolean eos = !of(events, Event.Kind.EOS).isEmpty();
        List<Event> weak = of(events, Event.Kind.WEAK);
        Blast heaviest = effects.stream().map(Event::blast).reduce(null, Blast::max);
        Location ackLoc = acks.isEmpty()
                ? (e.ackSetting != null ? e.ackSetting : e.location)
                : acks.get(0).location();
        Related entryRel = new Related("entry point", e.location);
        Related ackRel = new Related("ack", ackLoc);

        // dedupe switched off matters only to a handler that has an effect a repeat duplicates: one whose
        // writes are idempotent (an upsert by id, a projection keyed by aggregate id) has nothing to lose
        boolean exposed = effects.stream().anyMatch(x -> !x.keyed());
        if (e.framework == Entry.Framework.WEAK || e.framework == Entry.Framework.DISABLED && exposed) {
            Location at = e.frameworkLocation != null ? e.frameworkLocation : e.location;
            out.add(finding(
                    Rule.WEAK_DEDUPE,
                    e.framework == Entry.Framework.DISABLED ? Level.WARNING : Level.WARNING,
                    e.frameworkText
                            + (e.framework == Entry.Framework.DISABLED
                                    ? "; every redelivery of " + e.name + " applies again"
                                    : ""),
                    at,
                    e,
                    heaviest,
                    List.of(new Step(e.name, e.location)),
                    List.of(entryRel),
                    e.name));
        }
        for (Event w : weak) {
            out.add(finding(
                    Rule.WEAK_DEDUPE,
                    Level.WARNING,
                    w.what(),
                    w.location(),
                    e,
                    heaviest,
                    w.path(),
                    List.of(entryRel),
                    w.member()));
        }

        boolean auto = e.ack == Entry.Ack.AUTO;
        if (auto) {
            // an effect before the pull (a request sent before the answer is received) is not at risk
            Event worst = worst(effects.stream().filter(x -> afterPull(e, x)).toList());
            // a handler that only prints or counts what it receives loses nothing a reviewer would act on;
            // one whose calls lead where the trace cannot follow (an interface's lambda) still gets the note
            if (worst != null || !observesOnly(e)) {
                Level level = worst == null
                        ? Level.NOTE
                        : worst.blast().ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING;
                List<Related> rel = new ArrayList<>(
                        List.of(entryRel, new Related("ack", e.ackSetting != null ? e.ackSetting : e.location)));
                if (worst != null) {
                    rel.add(new Related("effect", worst.location()));
                }
                out.add(finding(
                        Rule.AUTO_ACK,
                        level,
                        e.ackText
                                + (worst == null
                                        ? "; the handler has no effect in sight, so a loss is all it risks"
                                        : "; a crash loses messages and a rebalance re-applies " + worst.what()),
                        e.ackSetting != null ? e.ackSetting : e.location,
                        e,
                        worst == null ? null : worst.blast(),
                        worst == null ? List.of(new Step(e.name, e.location)) : worst.path(),
                        rel,
                        e.name));
            }
        }

        Set<Event> lost = new LinkedHashSet<>();
        // the first ack on the effects' path decides; an ack on another branch (an early exit, another switch arm)
        // comes before none of them, and the next ack is looked at instead. An ack on an arm no decided ack shares (the
        // override of another subclass, the other arm of an if) is the first of its own path and decides that one
        List<Event> decided = new ArrayList<>();
        for (Event first : e.ack == Entry.Ack.EXPLICIT ? acks : List.<Event>of()) {
            if (decided.stream().anyMatch(d -> !d.exclusiveWith(first))) {
                continue;
            }
            List<Event> after = effects.stream()
                    .filter(x -> x.seq() > first.seq() && !x.exclusiveWith(first))
                    .toList();
            boolean anyBefore = effects.stream().anyMatch(x -> x.seq() < first.seq() && !x.exclusiveWith(first));
            if (after.isEmpty() && !anyBefore && effects.stream().anyMatch(x -> x.exclusiveWith(first))) {
                continue;
            }
            if (anyBefore) {
                // work done before the ack is safe; what comes after it is lost on a crash all the same, unless it
                // is only a cache entry the next read rebuilds
                after = after.stream().filter(x -> x.blast() != Blast.CACHE).toList();
            }
            if (!after.isEmpty()) {
                Event worst = worst(after);
                lost.addAll(after);
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        worst.blast().ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING,
                        "acknowledged (" + first.what() + ") before " + worst.what() + ": a crash in between loses it",
                        first.location(),
                        e,
                        worst.blast(),
                        throughAck(first, worst),
                        List.of(
                                entryRel,
                                new Related("ack", first.location()),
                                new Related("effect", worst.location())),
                        first.member()));
            }
            decided.add(first);
        }

        // an ack in a finally block runs when the effect failed too: the failure is acknowledged, never redelivered
        if (e.ack == Entry.Ack.EXPLICIT) {
            for (Map.Entry<Event, List<Event>> fa : finallyAcks.entrySet()) {
                Event a = fa.getKey();
                Event worst = worst(fa.getValue());
                if (out.stream()
                        .anyMatch(x -> x.rule() == Rule.ACK_BEFORE_EFFECT
                                && x.location().equals(a.location()))) {
                    continue;
                }
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        worst.blast().ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING,
                        "acknowledged in a finally block (" + a.what() + "), so when "
                                + (worst.kind() == Event.Kind.WORK ? "the call that " : "") + worst.what()
                                + " fails the message is acknowledged all the same and never redelivered",
                        a.location(),
                        e,
                        worst.blast(),
                        worst.path(),
                        List.of(entryRel, new Related("ack", a.location()), new Related("effect", worst.location())),
                        a.member()));
            }
        }

        // the code acknowledges by hand and means a silent arm to leave the message for redelivery, but the container
        // acknowledges whatever the listener returned normally from: the failure is consumed (under auto-commit, a
        // container that seeks back only to a record whose listener threw)
        if (e.ack == Entry.Ack.AFTER_RETURN || auto) {
            for (Event r : of(events, Event.Kind.REQUEUE_IGNORED)) {
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        Level.ERROR,
                        r.what() + ": the message is consumed although its work failed. "
                                // a reject that the queue drops is already a throw: the fix is where it goes
                                + (r.what().contains("AmqpRejectAndDontRequeueException")
                                        ? "Give the queue a dead-letter exchange, or requeue a transient failure"
                                        : "Throw instead to have it redelivered"),
                        r.location(),
                        e,
                        heaviest,
                        r.path(),
                        List.of(entryRel),
                        r.member()));
            }
        }

        // a catch-all that returns as the normal path does, before the work after its try statement: acknowledged on
        // return, or by an ack the code makes after it, with that work never done
        for (Event r : of(events, Event.Kind.RETURNED_EARLY)) {
            if (e.ack == Entry.Ack.AFTER_RETURN
                    || auto
                    || e.ack == Entry.Ack.EXPLICIT
                            && acks.stream().anyMatch(a -> a.seq() > r.seq() && !a.exclusiveWith(r))) {
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        Level.ERROR,
                        r.what() + ". Rethrow, or return a failure the caller does not acknowledge",
                        r.location(),
                        e,
                        heaviest,
                        r.path(),
                        List.of(entryRel),
                        r.member()));
            }
        }

        // a library wrapper that commits the record whatever its handler's future says: the failure is consumed
        for (Map.Entry<Location, String> failed : e.failedCommits.entrySet()) {
            out.add(finding(
                    Rule.ACK_BEFORE_EFFECT,
                    heaviest == null || heaviest.ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING,
                    failed.getValue(),
                    failed.getKey(),
                    e,
                    heaviest,
                    List.of(new Step(e.name, e.location)),
                    List.of(entryRel, new Related("ack", failed.getKey())),
                    e.name));
        }

        // work handed to another thread that the handler does not wait for runs after the ack
        if (e.ack == Entry.Ack.AFTER_RETURN || e.timerCommit) {
            Set<Location> reported = new LinkedHashSet<>();
            // each hand-off is reported once, under the heaviest work it hands on (a Jira comment, not a cache put)
            for (Event x : effects.stream()
                    .sorted(java.util.Comparator.comparingInt(y -> y.blast().ordinal()))
                    .toList()) {
                if (x.handedOff() != null && !lost.contains(x)) {
                    lost.add(x);
                    if (reported.add(x.handedOff())) {
                        out.add(finding(
                                Rule.ACK_BEFORE_EFFECT,
                                x.blast().ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING,
                                "hands " + x.what() + " to another thread and returns without waiting: " + e.ackText
                                        + ", so the message is acknowledged before the work runs and a crash loses it",
                                x.handedOff(),
                                e,
                                x.blast(),
                                x.path(),
                                List.of(
                                        entryRel,
                                        new Related("hand-off", x.handedOff()),
                                        new Related("effect", x.location())),
                                x.member()));
                    }
                }
            }
        } else if (e.ack == Entry.Ack.EXPLICIT) {
            List<Event> handOffs = of(events, Event.Kind.ASYNC);
            List<Event> waits = of(events, Event.Kind.WAIT);
            for (Event a : acks) {
                if (a.handedOff() != null) {
                    // acknowledged by the handed-off task itself, after its own work: that thread orders the
                    // ack and the effects it follows, as any handler does
                    continue;
                }
                Event h = handOffs.stream()
                        .filter(x -> x.seq() < a.seq() && !x.exclusiveWith(a))
                        .reduce((p, q) -> q)
                        .orElse(null);
                if (h != null && waits.stream().noneMatch(w -> w.seq() > h.seq() && w.seq() < a.seq())) {
                    effects.stream().filter(x -> x.handedOff() != null).forEach(lost::add);
                    out.add(finding(
                            Rule.ACK_BEFORE_EFFECT,
                            Level.ERROR,
                            "acknowledges (" + a.what() + ") after handing the work to another thread (" + h.what()
                                    + ") without waiting for it (or after a timed wait whose result is ignored):"
                                    + " a crash loses every message still in flight",
                            a.location(),
                            e,
                            heaviest,
                            a.path(),
                            List.of(entryRel, new Related("hand-off", h.location()), new Related("ack", a.location())),
                            a.member()));
                    break;
                }
            }
        }

        // a publish the broker never confirmed, then the ack of the message it came from: a retry (or a forward) the
        // broker loses on a connection drop or a node failure takes the message with it
        if (e.ack == Entry.Ack.EXPLICIT) {
            for (Event u : of(events, Event.Kind.UNCONFIRMED)) {
                acks.stream()
                        .filter(a -> a.seq() > u.seq() && !a.exclusiveWith(u))
                        .findFirst()
                        .ifPresent(a -> out.add(finding(
                                Rule.ACK_BEFORE_EFFECT,
                                Level.ERROR,
                                u.what() + ", and the delivery is acknowledged after it (" + Tracer.shortText0(a.what())
                                        + "): a message the broker never stores (a connection lost, a node failing) is"
                                        + " lost with the delivery it came from. Send with publisher confirms",
                                u.location(),
                                e,
                                Blast.MESSAGE,
                                u.path(),
                                List.of(entryRel, new Related("ack", a.location())),
                                u.member())));
            }
        }

        // a reactor timeout cancels its subscription, not the blocking work already running under it: when the
        // timed-out message is retried (a retry operator, a failure handler publishing it again) the work that went
        // on completes and then runs again
        if (e.ack != Entry.Ack.NONE && e.ack != Entry.Ack.AUTO) {
            List<Event> retries = of(events, Event.Kind.RETRIES);
            if (!retries.isEmpty()) {
                for (Event t : of(events, Event.Kind.TIMEOUT)) {
                    Event r = retries.get(0);
                    out.add(finding(
                            Rule.DUPLICATE_EFFECT,
                            Level.WARNING,
                            "times the work out (" + t.what() + ") and retries it (" + r.what() + "), but a timeout"
                                    + " only cancels the subscription: work already running (a blocking write, a call"
                                    + " in flight) completes, and the retry runs it again",
                            t.location(),
                            e,
                            heaviest == null ? Blast.DATA : heaviest,
                            t.path(),
                            List.of(entryRel, new Related("retry", r.location())),
                            t.member()));
                }
            }
        }

        for (Event x : of(events, Event.Kind.EARLY_ACK)) {
            out.add(finding(
                    Rule.ACK_BEFORE_EFFECT,
                    Level.ERROR,
                    x.what(),
                    x.location(),
                    e,
                    heaviest == null ? Blast.DATA : heaviest,
                    x.path(),
                    List.of(entryRel, new Related("ack", x.location())),
                    x.member()));
        }

        // a batch send whose failed entries nobody reads: the message behind an entry the service refused is
        // acknowledged all the same (moved to a dead-letter queue that never got it, forwarded nowhere)
        if (e.ack != Entry.Ack.NONE) {
            for (Event d : of(events, Event.Kind.DROPPED)) {
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        Level.ERROR,
                        d.what() + ": a message whose entry failed is acknowledged all the same and lost ("
                                + e.ackText + "). Read the failed entries and retry them, or leave their messages"
                                + " unacknowledged",
                        d.location(),
                        e,
                        Blast.MESSAGE,
                        d.path(),
                        List.of(entryRel, new Related("effect", d.location())),
                        d.member()));
            }
        }

        // an ack after the message was only put in a buffer a later stage drains (a Flux sink, a blocking queue, a temp
        // file stored at the end): the later stage's work is not done, and a crash or its failure loses the message.
        // The buffer and the ack are in the same method, as a reader sees them; a drain between them (the temp file
        // stored) is a wait for the work.
        if (e.ack != Entry.Ack.AUTO && e.ack != Entry.Ack.NONE) {
            List<Event> buffers = of(events, Event.Kind.BUFFER);
            List<Event> waits = of(events, Event.Kind.WAIT);
            Set<Location> reported = new LinkedHashSet<>();
            for (Event a : acks) {
                Event b = buffers.stream()
                        .filter(x -> x.seq() < a.seq()
                                && !x.exclusiveWith(a)
                                && x.member().equals(a.member())
                                && x.location().file().equals(a.location().file())
                                && Objects.equals(x.handedOff(), a.handedOff()))
                        .reduce((p, q) -> q)
                        .orElse(null);
                if (b == null
                        || waits.stream().anyMatch(w -> w.seq() > b.seq() && w.seq() < a.seq())
                        || !reported.add(a.location())) {
                    continue;
                }
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        Level.ERROR,
                        "acknowledges (" + Tracer.shortText0(a.what()) + ") once the message is only buffered: "
                                + b.what()
                                + "; the work on it happens later, so a crash or a failure of that later stage loses"
                                + " a message already acknowledged",
                        a.location(),
                        e,
                        heaviest,
                        a.path(),
                        List.of(entryRel, new Related("hand-off", b.location()), new Related("ack", a.location())),
                        a.member()));
            }
        }

        if (e.ack == Entry.Ack.AFTER_RETURN && BufferedOnly.pushed(e)) {
            BufferedOnly.find(events)
                    .ifPresent(b -> out.add(finding(
                            Rule.ACK_BEFORE_EFFECT,
                            Level.ERROR,
                            "hands the message to an in-process buffer (" + b.what() + ") and returns: " + e.ackText
                                    + ", so the message is acknowledged while its work waits in memory; a crash, or a failure"
                                    + " of the stage that drains the buffer, loses it. Do the work before returning, or keep"
                                    + " the buffer where it survives (an outbox table, a topic)",
                            BufferedOnly.where(b),
                            e,
                            heaviest == null ? Blast.MESSAGE : heaviest,
                            b.path(),
                            List.of(entryRel, new Related("hand-off", b.location())),
                            b.member())));
        }

        Set<Event> weakClaims = new LinkedHashSet<>();
        Set<Event> reportedChecks = new LinkedHashSet<>();
        boolean dbWrite = effects.stream().anyMatch(x -> x.category() == Event.Category.DATABASE)
                || !claims.isEmpty()
                || !guards.isEmpty();
        for (Event x : effects) {
            // a consumer committing on a timer reads again what it handled since the last commit: its effects repeat
            boolean noRedelivery = e.ack == Entry.Ack.NONE || auto && !e.timerCommit;
            // a timer may commit between the write and the publish as well: the loss is reported as it is without one
            if ((e.ack == Entry.Ack.NONE || auto)
                    && x.category() == Event.Category.PUBLISH
                    && !x.keyed()
                    && !eos
                    && effects.stream()
                            .anyMatch(d -> d.category() == Event.Category.DATABASE
                                    && d.seq() < x.seq()
                                    && !d.exclusiveWith(x))) {
                // no redelivery to repeat it, but the loss does not depend on the ack: the write commits, the
                // publish after it may never happen
                out.add(finding(
                        Rule.DUAL_WRITE,
                        Level.WARNING,
                        x.what()
                                + " after writing to the database, outside its transaction: a crash between them loses the"
                                + " message (" + e.ackText + ")",
                        x.location(),
                        e,
                        x.blast(),
                        x.path(),
                        List.of(entryRel, ackRel, new Related("effect", x.location())),
                        x.member()));
                continue;
            }
            if (x.keyed()
                    || noRedelivery
                    // work handed to another thread is lost on a crash after the ack, and repeated on a redelivery
                    // before it: the ack does not wait for it, so it may already have run
                    || lost.contains(x) && x.handedOff() == null
                    || onceCalls.stream().anyMatch(o -> covers(o, x))
                    || e.framework == Entry.Framework.ALL
                    || e.framework == Entry.Framework.WEAK
                    || !weak.isEmpty()
                    || x.category() == Event.Category.PUBLISH && eos) {
                continue;
            }
            if (x.category() == Event.Category.DATABASE) {
                if (e.framework == Entry.Framework.DATABASE) {
                    continue;
                }
                // a claim, or a write under a unique key / a guarded transition: covers the write if one transaction
                // holds both
                Event record = claims.stream()
                        .filter(c -> sameTx(c, x))
                        .findFirst()
                        .or(() -> guards.stream().filter(g -> sameTx(g, x)).findFirst())
                        .or(() -> claims.stream().findFirst())
                        .or(() -> guards.stream().filter(g -> g.seq() < x.seq()).findFirst())
                        .orElse(null);
                if (record != null) {
                    if (!sameTx(record, x)) {
                        weakClaims.add(record);
                    }
                    continue;
                }
            }
            if (x.category() == Event.Category.CACHE && !claims.isEmpty()) {
                continue;
            }
            List<Event> governing = checks.stream()
                    .filter(c -> c.seq() < x.seq()
                            && !c.exclusiveWith(x)
                            && (c.kind() != Event.Kind.LOOKUP
                                    || x.arms().contains(c.arms().get(c.arms().size() - 1))))
                    .toList();
            // a lookup whose empty arm holds the effect is the check that decided it, nearer than any before it
            Event check = governing.stream()
                    .filter(c -> c.kind() == Event.Kind.LOOKUP)
                    .reduce((a, b) -> b)
                    .or(() -> governing.stream().findFirst())
                    .orElse(null);
            if (check != null) {
                if (reportedChecks.add(check)) {
                    out.add(finding(
                            Rule.CHECK_THEN_ACT,
                            x.blast() == Blast.MONEY ? Level.ERROR : Level.WARNING,
                            "checks (" + Tracer.shortText0(check.what()) + ") and then " + x.what()
                                    + ": two concurrent deliveries both pass the check",
                            check.location(),
                            e,
                            x.blast(),
                            x.path(),
                            List.of(entryRel, ackRel, new Related("effect", x.location())),
                            check.member()));
                }
                // the record the check reads is written only after the effect: besides the race, a crash or a
                // failure between the two redelivers a message whose record was never written, the check passes
                // and the effect runs again (a transaction holding both database writes closes that window)
                Event record = recordAfter(check, x, events);
                if (record != null
                        && !(x.category() == Event.Category.DATABASE
                                && record.category() == Event.Category.DATABASE
                                && sameTx(record, x))) {
                    out.add(finding(
                            Rule.DUPLICATE_EFFECT,
                            x.blast() == Blast.MONEY || x.blast() == Blast.NOTIFICATION ? Level.ERROR : Level.WARNING,
                            x.what() + " before the record its check reads is written ("
                                    + Tracer.shortText0(record.what()) + "): a crash or a failure between them"
                                    + " redelivers the message, the check ("
                                    + Tracer.shortText0(check.what()) + ") passes and it runs again",
                            x.location(),
                            e,
                            x.blast(),
                            x.path(),
                            List.of(
                                    entryRel,
                                    ackRel,
                                    new Related("effect", x.location()),
                                    new Related("record", record.location())),
                            x.member()));
                }
                continue;
            }
            if (x.category() == Event.Category.PUBLISH && dbWrite && writtenBefore(x, effects, claims, guards)) {
                out.add(finding(
                        Rule.DUAL_WRITE,
                        Level.WARNING,
                        x.what()
                                + " after writing to the database, outside its transaction: a crash between them loses the"
                                + " message, a redelivery sends it again",
                        x.location(),
                        e,
                        x.blast(),
                        x.path(),
                        List.of(entryRel, ackRel, new Related("effect", x.location())),
                        x.member()));
                continue;
            }
            String why;
            if (e.framework == Entry.Framework.DISABLED) {
                why = "Eventuate's duplicate detection is switched off";
            } else if (e.timerCommit) {
                why = "offsets commit on a timer, so what was handled since the last commit is read again after a crash"
                        + " or rebalance";
            } else if (x.category() == Event.Category.EXTERNAL
                    && (!claims.isEmpty() || e.framework == Entry.Framework.DATABASE)) {
                why =
                        "the dedupe record lives in the database transaction, the call does not: a crash after the call and before"
                                + " the commit makes it again";
            } else {
                why = "nothing on the path records the event id";
            }
            Level level = switch (x.blast()) {
                case MONEY, NOTIFICATION -> Level.ERROR;
                case DATA, MESSAGE -> Level.WARNING;
                case CACHE -> Level.NOTE;
            };
            String fix = switch (x.category()) {
                case DATABASE ->
                    "Claim the event id with `IdempotentConsumer` (or `Inbox.claim`) in the same transaction as this write.";
                case EXTERNAL ->
                    "Move this call to `tx.outbox().add(…)` with an idempotency key, behind a claim by `IdempotentConsumer`.";
                case PUBLISH -> "Publish through `tx.outbox()` so `OutboxRelay` sends it once, with the event id.";
                case CACHE -> "Harmless if the write is idempotent; otherwise claim with `IdempotentConsumer` first.";
            };
            out.add(new Finding(
                    Rule.DUPLICATE_EFFECT,
                    level,
                    x.what()
                            + (x.handedOff() != null && !ackedInSameTask(x, acks)
                                    ? " on another thread the ack does not wait for; on redelivery it runs again: "
                                    : " before the ack; on redelivery it runs again: ")
                            + why,
                    fix,
                    x.location(),
                    e.id(),
                    x.blast(),
                    x.path(),
                    List.of(entryRel, ackRel, new Related("effect", x.location())),
                    fingerprint(Rule.DUPLICATE_EFFECT, x.location(), x.member()),
                    null));
        }
        // a dedupe record that commits on its own before the work (an auto-commit insert, a save outside the work's
        // transaction, a REQUIRES_NEW helper): when the work then fails or the process dies, the redelivery finds the
        // record and skips the message, which is lost for good
        Set<Location> early = new LinkedHashSet<>();
        for (Event r : events) {
            if (!(r.kind() == Event.Kind.MARK
                            || r.kind() == Event.Kind.CLAIM && r.what().startsWith("insert into"))
                    || early.contains(r.location())) {
                continue;
            }
            Event w = effects.stream()
                    .filter(x -> x.seq() > r.seq()
                            && !x.exclusiveWith(r)
                            && !x.location().equals(r.location())
                            && x.handedOff() == null
                            && committedBefore(e, r, x, events))
                    .findFirst()
                    .orElse(null);
            if (w != null) {
                early.add(r.location());
                weakClaims.remove(r);
                out.add(finding(
                        Rule.ACK_BEFORE_EFFECT,
                        w.blast().ordinal() <= Blast.DATA.ordinal() ? Level.ERROR : Level.WARNING,
                        "the dedupe record (" + r.what() + ") commits "
                                + (r.tx() == null ? "at once (no transaction holds it)" : "in its own transaction")
                                + " before the work (" + w.what() + ")" + (w.tx() == null ? "" : " commits")
                                + ": when that fails or the process dies in between, the redelivery finds the record"
                                + " and skips the message, which is lost. Write the record in the work's transaction",
                        r.location(),
                        e,
                        w.blast(),
                        w.path(),
                        List.of(
                                entryRel,
                                new Related("dedupe record", r.location()),
                                new Related("effect", w.location())),
                        r.member()));
            }
        }
        // a write committed by a REQUIRES_NEW transaction inside the handler's: it commits when the inner method
        // returns, before the outer work; when that then fails to commit (or the process dies first), the inner
        // write (a reply, an outbox row the relay sends) stands for work that never happened
        Set<Location> nested = new LinkedHashSet<>();
        for (Event n : of(events, Event.Kind.NESTED)) {
            if (nested.contains(n.location())) {
                continue;
            }
            Event inner = effects.stream()
                    .filter(x -> x.seq() > n.seq()
                            && !Objects.equals(x.tx(), n.tx())
                            && x.category() != Event.Category.CACHE
                            && x.path().stream().anyMatch(s -> s.location().equals(n.location())))
                    .findFirst()
                    .orElse(null);
            Event outer = inner == null
                    ? null
                    : effects.stream()
                            .filter(x -> Objects.equals(x.tx(), n.tx())
                                    && x.category() == Event.Category.DATABASE
                                    && !x.exclusiveWith(n))
                            .min(Comparator.comparing(Event::keyed))
                            .orElse(null);
            if (outer != null) {
                nested.add(n.location());
                out.add(finding(
                        Rule.DUAL_WRITE,
                        Level.WARNING,
                        n.what() + " runs in a transaction of its own (REQUIRES_NEW) inside the handler's: "
                                + inner.what() + " commits before " + outer.what()
                                + " does, and stays when that fails to commit or the process dies first",
                        n.location(),
                        e,
                        inner.blast(),
                        inner.path(),
                        List.of(
                                entryRel,
                                new Related("effect", inner.location()),
                                new Related("effect", outer.location())),
                        n.member()));
            }
        }
        for (Event c : weakClaims) {
            out.add(finding(
                    Rule.WEAK_DEDUPE,
                    Level.WARNING,
                    c.what() + " commits apart from the effect (no transaction spans both):"
                            + " a crash between them drops or repeats the effect",
                    c.location(),
                    e,
                    heaviest,
                    c.path(),
                    List.of(entryRel),
                    c.member()));
        }
        for (Event r : of(events, Event.Kind.REMOTE)) {
            if (r.tx() != null) {
                List<Related> rel = new ArrayList<>(List.of(entryRel));
                if (r.txLocation() != null) {
                    rel.add(new Related("transaction", r.txLocation()));
                }
                out.add(finding(
                        Rule.REMOTE_CALL_IN_TRANSACTION,
                        Level.WARNING,
                        r.what()
                                + " while a database transaction is open: it holds the connection and locks for the whole call,"
                                + " and a rollback cannot take it back",
                        r.location(),
                        e,
                        heaviest,
                        r.path(),
                        rel,
                        r.member()));
            }
        }
        for (Event s : of(events, Event.Kind.SELF_INVOCATION)) {
            List<Related> rel = new ArrayList<>(List.of(entryRel));
            if (s.txLocation() != null) {
                rel.add(new Related("transaction", s.txLocation()));
            }
            out.add(finding(
                    Rule.SELF_INVOCATION,
                    Level.WARNING,
                    "calls @Transactional " + s.what()
                            + " on this: the proxy is bypassed and it runs without a transaction",
                    s.location(),
                    e,
                    heaviest,
                    s.path(),
                    rel,
                    s.member()));
        }
        if (LEASED.contains(e.broker)) {
            Set<Location> seen = new LinkedHashSet<>();
            for (Event s : of(events, Event.Kind.SLOW)) {
                if (seen.add(s.location())) {
                    out.add(finding(
                            Rule.SLOW_CALL_IN_LEASE,
                            Level.WARNING,
                            s.what() + ", inside " + e.kind
                                    + ": a hang outlives the lease and the message goes to another consumer while this one works on it",
                            s.location(),
                            e,
                            heaviest,
                            s.path(),
                            List.of(entryRel, ackRel),
                            s.member()));
                }
            }
            boolean remote = !of(events, Event.Kind.REMOTE).isEmpty()
                    || !of(events, Event.Kind.SLOW).isEmpty();
            if (e.batch > 0 && e.leaseMs > 0 && remote && e.leaseMs / e.batch < 1000) {
                out.add(finding(
                        Rule.BATCH_OUTLIVES_LEASE,
                        Level.WARNING,
                        "a batch of " + e.batch + " against " + e.leaseName + " of " + e.leaseMs + " ms leaves "
                                + (e.leaseMs / e.batch) + " ms per message for a handler that makes remote calls",
                        e.batchLocation,
                        e,
                        heaviest,
                        List.of(new Step(e.name, e.location)),
                        List.of(entryRel),
                        e.name));
            }
        }

        // the same problem reached along several paths is one finding, with the first (shortest-walked) path
        Set<String> keys = new LinkedHashSet<>();
        out.removeIf(f -> !keys.add(
                f.rule().id() + "@" + f.location() + ":" + f.location().column()));
        double risk = out.stream().mapToDouble(f -> f.weight(heaviest)).sum();
        String dedupe = once
                ? "once IdempotentConsumer"
                : e.framework != Entry.Framework.NONE
                        ? e.frameworkText
                        : !weak.isEmpty()
                                ? weak.get(0).what()
                                : !claims.isEmpty()
                                        ? "claim: " + claims.get(0).what()
                                        : !guards.isEmpty()
                                                ? "guarded: " + guards.get(0).what()
                                                : !checks.isEmpty() ? "check-then-act (a race, not a dedupe)" : "none";
        Consumer c = new Consumer(
                e.id(),
                e.kind,
                e.name,
                e.location,
                e.ackText == null ? e.ack.name() : e.ackText,
                dedupe,
                effects.size(),
                heaviest,
                Math.round(risk * 100) / 100.0,
                Scoring.consumerScore(risk));
        return new Result(c, out);
    }

    private static List<Event> of(List<Event> events, Event.Kind kind) {
        return events.stream().filter(x -> x.kind() == kind).toList();
    }

    /**
     * Whether an effect comes after the pull that acknowledged: a request a client sends before it
     * receives the answer is not work on a received message. An entry that is not a pull call
     * (a listener method, a callback) acknowledges around everything it does.
     */
    private static boolean afterPull(Entry e, Event x) {
        if (!(e.decl instanceof MethodCallExpr)) {
            return true;
        }
        // the first place the effect's path (after the entry itself) touches the entry's own file
        return Stream.concat(x.path().stream().map(Step::location), Stream.of(x.location()))
                .filter(l -> l.file().equals(e.location.file()) && !l.equals(e.location))
                .findFirst()
                .map(l -> l.line() >= e.location.line())
                .orElse(true);
    }

    /** Calls that only look at or print what was received: no state changes through them. */
    private static final Pattern OBSERVING = Pattern.compile(
            "print|println|printf|format|trace|debug|info|warn|error|toString|valueOf|size|isEmpty|length"
                    + "|equals|hashCode|get\\w*|is\\w*|has\\w*|next|value|key|currentTimeMillis|nanoTime"
                    + "|incrementAndGet|getAndIncrement|of\\w*|close|receive\\w*|poll");

    /** Whether every call the handler's own body makes only reads or prints (nothing the trace could miss). */
    private static boolean observesOnly(Entry e) {
        // a pull's own loop or method: only what runs from the pull on handles what it returned
        int from = e.decl instanceof MethodCallExpr pull
                ? pull.getBegin().map(p -> p.line).orElse(0)
                : 0;
        return e.body != null
                && e.body.findAll(MethodCallExpr.class).stream()
                        .filter(c -> c.getBegin().map(p -> p.line >= from).orElse(true))
                        .allMatch(c -> OBSERVING.matcher(c.getNameAsString()).matches());
    }

    /**
     * The path of an ack-before-effect finding: the calls down to the ack (so a wrapper's ack names the handler's
     * call into the wrapper, where the order is decided), then the effect's calls from where the two part.
     */
    private static List<Step> throughAck(Event ack, Event effect) {
        List<Step> a = ack.path();
        List<Step> x = effect.path();
        int common = 0;
        while (common < a.size() - 1 && common < x.size() - 1 && a.get(common).equals(x.get(common))) {
            common++;
        }
        List<Step> out = new ArrayList<>(a);
        out.addAll(x.subList(common, x.size()));
        return List.copyOf(out);
    }

    private static Event worst(List<Event> effects) {
        return effects.stream()
                .min(Comparator.comparing((Event x) -> x.blast().ordinal()).thenComparing(Event::seq))
                .orElse(null);
    }

    /** A call into once covers an effect made in the same method, or in one that method (transitively) called. */
    private static boolean covers(Event onceCall, Event effect) {
        List<Step> scope = onceCall.path().subList(0, onceCall.path().size() - 1);
        List<Step> at = effect.path().subList(0, effect.path().size() - 1);
        return at.size() >= scope.size() && at.subList(0, scope.size()).equals(scope);
    }

    /**
     * The record commits before the effect does: it is written with no transaction open (auto-commit), or in a
     * transaction a callee opened that the effect is not in and that nothing after the effect writes in (so it closed
     * first; a transaction still open around the effect, a REQUIRES_NEW nested in it, commits after it).
     */
    private static boolean committedBefore(Entry e, Event record, Event effect, List<Event> events) {
        if (record.tx() == null) {
            return true;
        }
        // a transaction the handler itself opens (or its container's) closes after everything the handler does
        return !record.tx().equals(effect.tx())
                && !e.location.equals(record.txLocation())
                && events.stream().noneMatch(z -> record.tx().equals(z.tx()) && z.seq() > effect.seq());
    }

    private static boolean sameTx(Event a, Event b) {
        return a.tx() != null && Objects.equals(a.tx(), b.tx());
    }

    /**
     * A write after {@code x} on every run that reaches it (a cache entry, a row, a claim) naming what {@code check}
     * read: an argument of both, the key or the message's field it came from ({@code srt.hasKey(keys)} then
     * {@code ops.set(keys, …)}; {@code entries("mail_log").containsKey(msgId)} then {@code put("mail_log", msgId, …)}).
     */
    private static Event recordAfter(Event check, Event x, List<Event> events) {
        List<Pattern> keys = keyArguments(check.what());
        if (keys.isEmpty()) {
            return null;
        }
        return events.stream()
                .filter(r -> r.seq() > x.seq()
                        && !r.exclusiveWith(x)
                        && !r.exclusiveWith(check)
                        && (r.kind() == Event.Kind.EFFECT
                                        && (r.category() == Event.Category.CACHE
                                                || r.category() == Event.Category.DATABASE)
                                || r.kind() == Event.Kind.CLAIM
                                || r.kind() == Event.Kind.MARK)
                        && keys.stream()
                                .anyMatch(k -> k.matcher(quotedCall(r.what())).find()))
                .findFirst()
                .orElse(null);
    }

    /**
     * The arguments of a check's call and of the calls it reads from ({@code entries("mail_log").containsKey(msgId)}:
     * msgId), literals left out, each as a pattern matching that whole expression in another call's text.
     */
    private static List<Pattern> keyArguments(String check) {
        List<Pattern> out = new ArrayList<>();
        Expression parsed;
        try {
            parsed = StaticJavaParser.parseExpression(check);
        } catch (RuntimeException notACall) {
            return out;
        }
        for (Expression at = parsed;
                at instanceof MethodCallExpr c;
                at = c.getScope().orElse(null)) {
            for (Expression a : c.getArguments()) {
                if (!a.isLiteralExpr()) {
                    out.add(Pattern.compile("(?<![\\w.])" + Pattern.quote(a.toString()) + "(?![\\w(])"));
                }
            }
        }
        return out;
    }

    /** The call an effect's text quotes in parentheses ("writes the cache (ops.set(k, v))"): ops.set(k, v). */
    private static String quotedCall(String what) {
        int open = what.indexOf('(');
        int depth = 0;
        for (int i = Math.max(open, 0); i < what.length(); i++) {
            char ch = what.charAt(i);
            if (ch == '(') {
                depth++;
            } else if (ch == ')' && --depth == 0) {
                return what.substring(open + 1, i);
            }
        }
        return open < 0 ? "" : what.substring(open + 1);
    }

    private static Finding finding(
            Rule rule,
            Level level,
            String message,
            Location at,
            Entry e,
            Blast blast,
            List<Step> path,
            List<Related> related,
            String member) {
        return new Finding(
                rule,
                level,
                message,
                rule.fix(),
                at,
                e.id(),
                blast,
                path,
                related,
                fingerprint(rule, at, member),
                null);
    }

    /** Rule, file, enclosing member and the code of the line: survives the line moving. */
    static String fingerprint(Rule rule, Location at, String member) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            String key = rule.id() + "\u0000" + at.file() + "\u0000" + member + "\u0000"
                    + at.snippet().replaceAll("\\s+", "");
            return HexFormat.of()
                    .formatHex(d.digest(key.getBytes(StandardCharsets.UTF_8)))
                    .substring(0, 16);
        } catch (NoSuchAlgorithmException ex) {
            throw new IllegalStateException("SHA-256 is part of every JDK", ex);
        }
    }

    /**
     * The work was handed to another thread together with its acknowledgement: the task acknowledges after it
     * ({@code pool.submit(() -> { handle(m); delete(m); })}), so the ack waits for it in that thread.
     */
    private static boolean ackedInSameTask(Event x, List<Event> acks) {
        return acks.stream().anyMatch(a -> x.handedOff().equals(a.handedOff()) && a.seq() > x.seq());
    }

    /**
     * A database write (a row, a claim, a guarded update) comes before the publish on a run that reaches it: a
     * write only on another arm of the if that chose this publish ({@code if (ok) { save; send(success) } else
     * send(failed)}) is not one.
     */
    private static boolean writtenBefore(Event x, List<Event> effects, List<Event> claims, List<Event> guards) {
        return effects.stream()
                        .anyMatch(d ->
                                d.category() == Event.Category.DATABASE && d.seq() < x.seq() && !d.exclusiveWith(x))
                || java.util.stream.Stream.concat(claims.stream(), guards.stream())
                        .anyMatch(d -> d.seq() < x.seq() && !d.exclusiveWith(x));
    }
}
