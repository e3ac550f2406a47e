package dev.once.testkit.broker;

import dev.once.testkit.broker.ScriptedHandler.Behaviour;
import dev.once.testsupport.StateMachines;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Predicate;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.ActionChainArbitrary;

/**
 * The jqwik skeleton of the broker adapters' state machines: the moves every broker has (publish a
 * new event with the handler's script for it, publish one again, start or stop a second process,
 * arm a crash in the ack gap), each run behind the world's supervisor and followed by its safety
 * check, and the property's body (each chain on a world of its own, then drained and checked).
 * Needs jqwik on the test class path, which this module does not bring along.
 *
 * <p>{@code -Donce.<broker>Chain.tries=N} ({@link #chainsPerTry}) means the same for every adapter:
 * each try runs N different generated chains, each on a new world (default 1).
 */
@SuppressWarnings("exports")
public final class BrokerChain {

    /** The name of the move {@link BrokerWorld#publishHeld}, as the adapters add it ({@link Moves#holds}). */
    public static final String HELD = "publish, its claim held by a slow holder elsewhere until met, then rolled back";

    /** The world of the chain this thread runs: jqwik's bounded shrinking may run one in the background. */
    private static final ThreadLocal<BrokerWorld<?, ?>> next = new ThreadLocal<>();

    private BrokerChain() {}

    /** {@code -Donce.<broker>Chain.tries}: how many different chains each try runs (default 1). */
    public static int chainsPerTry(String broker) {
        return Integer.getInteger("once." + broker + "Chain.tries", 1);
    }

    /** {@code n} different chains of {@code chains} for one try (shrinking keeps the failing one). */
    public static <W> Arbitrary<List<ActionChain<W>>> perTry(Arbitrary<ActionChain<W>> chains, int n) {
        return chains.list().ofSize(n);
    }

    /** Runs each chain on a new world of {@code world}, then drains and checks it, and closes it. */
    public static <W extends BrokerWorld<?, ?>> void run(List<ActionChain<W>> chains, Callable<W> world)
            throws Exception {
        for (ActionChain<W> chain : chains) {
            try (W w = world.call()) {
                next.set(w);
                try {
                    chain.run();
                    w.drainAndCheck();
                } finally {
                    w.awaitHolders();
                }
            } finally {
                next.remove();
            }
        }
    }

    /** What the handler does on its first calls for an event: up to {@code maxCalls} behaviours. */
    public static Arbitrary<List<Behaviour>> scripts(int maxCalls) {
        return Arbitraries.of(Behaviour.class).list().ofMaxSize(maxCalls);
    }

    /** Which published event a producer retry sends again (modulo their number). */
    public static Arbitrary<Integer> picks() {
        return Arbitraries.integers().between(0, 99);
    }

    /**
     * A move that lets the supervisor replace the dead processes first, records itself, and checks
     * the world's safety after it.
     */
    public static <W extends BrokerWorld<?, ?>, T> Action<W> move(
            Predicate<W> pre, Arbitrary<T> arg, String name, BiConsumer<W, T> body) {
        return StateMachines.move(pre, arg, name, (w, a) -> {
            w.supervise();
            w.moves.add(name + " " + a);
            body.accept(w, a);
            w.check();
        });
    }

    /**
     * The moves every broker has, for {@link Moves#build}; what publishing is, the adapter says.
     *
     * @param publish        a new event's argument (its script, at least: {@link #scripts})
     * @param publishesAgain a producer retry of a published event (its pick, at least: {@link #picks})
     * @param crash          the crash move's name: where the process dies
     */
    public static <W extends BrokerWorld<?, ?>, T, G> Moves<W> moves(
            Arbitrary<T> publish,
            BiConsumer<W, T> publishes,
            Arbitrary<G> again,
            BiConsumer<W, G> publishesAgain,
            String crash) {
        return new Moves<>(
                move(w -> true, publish, "publish", publishes),
                move(w -> !w.events.isEmpty(), again, "publish again", publishesAgain),
                crash);
    }

    /**
     * The moves every broker has, with their weights: publish (5), publish again (2), second process
     * starts (1), stops (1), crash after the next commit (2, or as {@link #crashWeight} says), and
     * {@link BrokerChain#HELD} (2) where the adapter {@linkplain #holds adds it}.
     */
    public static final class Moves<W extends BrokerWorld<?, ?>> {
        private final Action<W> publish;
        private final Action<W> again;
        private final String crash;
        private String process = "consumer";
        private Action<W> starts;
        private Action<W> held;
        private int crashWeight = 2;

        private Moves(Action<W> publish, Action<W> again, String crash) {
            this.publish = publish;
            this.again = again;
            this.crash = crash;
        }

        /** What the moves call a process: "second consumer starts" (default), "second runner starts". */
        public Moves<W> process(String process) {
            this.process = process;
            return this;
        }

        /** How the second process starts, when it takes an argument (default: {@link BrokerWorld#startB()}). */
        public <S> Moves<W> starts(String name, Arbitrary<S> arg, BiConsumer<W, S> body) {
            starts = move(w -> !w.hasB(), arg, name, body);
            return this;
        }

        /**
         * Adds the move {@link BrokerChain#HELD} (weight 2): a live process meets a slow holder. {@code publishesHeld} calls
         * {@link BrokerWorld#publishHeld} with how the adapter publishes and how long the holder holds.
         */
        public Moves<W> holds(Consumer<W> publishesHeld) {
            held = move(w -> true, Arbitraries.just(0), HELD, (w, i) -> publishesHeld.accept(w));
            return this;
        }

        /** How often the crash move comes against publish's 5 (default 2). */
        public Moves<W> crashWeight(int weight) {
            crashWeight = weight;
            return this;
        }

        /** The chains of these moves, on the world {@link #run} made for this thread; the adapter adds its own. */
        @SuppressWarnings("unchecked")
        public ActionChainArbitrary<W> build() {
            Action<W> startB = starts != null
                    ? starts
                    : move(w -> !w.hasB(), Arbitraries.just(0), "second " + process + " starts", (w, i) -> w.startB());
            ActionChainArbitrary<W> chains = ActionChain.<W>startWith(() -> (W) next.get())
                    .withAction(5, publish)
                    .withAction(2, again)
                    .withAction(1, startB)
                    .withAction(
                            1, move(W::hasB, Arbitraries.just(0), "second " + process + " stops", (w, i) -> w.stopB()))
                    .withAction(crashWeight, move(w -> true, Arbitraries.of("a", "b"), crash, BrokerWorld::armCrash));
            return held == null ? chains : chains.withAction(2, held);
        }
    }
}
