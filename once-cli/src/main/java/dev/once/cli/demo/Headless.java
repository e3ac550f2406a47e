package dev.once.cli.demo;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The page's scenario without the page: {@code events} payments, each with a fault when
 * {@code chaos} is on, a progress bar, and the two lanes side by side at the end.
 */
final class Headless {

    static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(60);

    private Headless() {}

    /**
     * The actions of a run: plain deliveries, or with chaos every fault at least once (when there
     * are events enough) and the rest drawn at random, in a shuffled order fixed by {@code seed}.
     */
    static List<Demo.Action> plan(int events, boolean chaos, long seed) {
        List<Demo.Action> plan = new ArrayList<>();
        Random random = new Random(seed);
        if (chaos) {
            Demo.Action[] faults = {
                Demo.Action.DOUBLE_PUBLISH, Demo.Action.CRASH, Demo.Action.REBALANCE, Demo.Action.CONCURRENT
            };
            for (int i = 0; i < faults.length && plan.size() < events; i++) {
                plan.add(faults[i]);
            }
            // Half of the remaining events get a fault; rebalances are rarer because each costs seconds.
            Demo.Action[] weighted = {
                Demo.Action.DOUBLE_PUBLISH,
                Demo.Action.DOUBLE_PUBLISH,
                Demo.Action.CRASH,
                Demo.Action.CRASH,
                Demo.Action.CONCURRENT,
                Demo.Action.CONCURRENT,
                Demo.Action.REBALANCE
            };
            while (plan.size() < events) {
                plan.add(random.nextBoolean() ? Demo.Action.DELIVER : weighted[random.nextInt(weighted.length)]);
            }
            Collections.shuffle(plan, random);
        } else {
            while (plan.size() < events) {
                plan.add(Demo.Action.DELIVER);
            }
        }
        return plan;
    }

    /** Runs the plan, drawing progress on {@code err}, and prints the table on {@code out}. */
    static void run(Demo demo, List<Demo.Action> plan, PrintWriter out, PrintWriter err) throws InterruptedException {
        long started = System.nanoTime();
        for (int i = 0; i < plan.size(); i++) {
            demo.perform(plan.get(i));
            // One payment at a time, settled before the next, so each fault hits the payment it was aimed at.
            if (!demo.awaitSettled(SETTLE_TIMEOUT)) {
                throw new IllegalStateException("the lanes did not settle within " + SETTLE_TIMEOUT.toSeconds()
                        + " s after " + plan.get(i).key + " of pay-" + (i + 1));
            }
            progress(err, i + 1, plan.size(), demo.state(), started);
        }
        err.println();
        err.flush();
        table(out, demo.state());
    }

    private static void progress(PrintWriter err, int done, int total, DemoState s, long started) {
        int width = 30;
        int filled = (int) ((long) done * width / total);
        err.print("\r[" + "#".repeat(filled) + "-".repeat(width - filled) + "] " + done + "/" + total
                + " payments   naive " + Demo.money(s.naive().ledger()) + "   once "
                + Demo.money(s.once().ledger())
                + String.format(Locale.ROOT, "   %.1f s  ", (System.nanoTime() - started) / 1e9));
        err.flush();
    }

    /** The final side-by-side table. */
    static void table(PrintWriter out, DemoState s) {
        out.println();
        out.println("charged " + Demo.money(s.charged()) + " (" + s.payments() + " payments of "
                + Demo.money(Demo.AMOUNT) + ") · " + s.delivered() + " delivered · " + s.duplicated() + " duplicated");
        out.println();
        String f = "%-22s %14s %14s%n";
        out.printf(f, "", "naive", "once");
        out.printf(f, "deliveries", s.naive().deliveries(), s.once().deliveries());
        out.printf(
                f,
                "in ledger",
                Demo.money(s.naive().ledger()),
                Demo.money(s.once().ledger()));
        out.printf(
                f,
                "overcount",
                Demo.money(s.naive().overcount()),
                Demo.money(s.once().overcount()));
        out.printf(
                f,
                "deduped",
                Demo.money(s.naive().deduped()),
                Demo.money(s.once().deduped()));
        out.printf(f, "card charges", s.naive().providerCharges(), s.once().providerCharges());
        out.printf(f, "provider replays", s.naive().providerReplays(), s.once().providerReplays());
        out.printf(f, "consumer crashes", s.naive().crashes(), s.once().crashes());
        out.printf(f, "refused commits", s.naive().refusedCommits(), s.once().refusedCommits());
        out.println();
        out.println(
                s.once().overcount() == 0 && s.once().ledger() == s.charged()
                        ? "once counted every payment exactly once; the naive consumer over-counted by "
                                + Demo.money(s.naive().overcount()) + "."
                        : "UNEXPECTED: the once lane does not match what was charged.");
        out.flush();
    }
}
