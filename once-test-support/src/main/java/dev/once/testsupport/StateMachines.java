package dev.once.testsupport;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.Transformer;

/**
 * What the jqwik state machines share (once-core's, and the broker adapters' against their real
 * brokers). Needs jqwik on the test class path, which this module does not bring along (so its
 * types in this API are not re-exported either).
 */
@SuppressWarnings("exports")
public final class StateMachines {

    private StateMachines() {}

    /** A move without an argument, taken where {@code pre} holds. */
    public static <W> Action<W> move(Predicate<W> pre, String name, Consumer<W> body) {
        return action(pre, Arbitraries.just(Transformer.mutate(name, body)));
    }

    /** A move drawn with an argument, named with it in the counterexample jqwik prints. */
    public static <W, T> Action<W> move(Predicate<W> pre, Arbitrary<T> arg, String name, BiConsumer<W, T> body) {
        Function<T, Transformer<W>> t = a -> Transformer.mutate(name + " " + a, w -> body.accept(w, a));
        return action(pre, arg.map(t));
    }

    private static <W> Action<W> action(Predicate<W> pre, Arbitrary<Transformer<W>> transformers) {
        return new Action.Independent<>() {
            @Override
            public boolean precondition(W w) {
                return pre.test(w);
            }

            @Override
            public Arbitrary<Transformer<W>> transformer() {
                return transformers;
            }
        };
    }

    /**
     * A test class's databases per thread, for chains that must have theirs to themselves: jqwik shrinks
     * on a thread of its own and, past its time bound, leaves it running in the background while the next
     * property starts. Each thread gets its own {@link Databases} on first use; {@link #close} closes them
     * all (a chain still running in the background then fails, unseen).
     */
    public static final class ThreadDatabases implements AutoCloseable {
        private final int poolSize;
        private final Map<Thread, Databases> perThread = new ConcurrentHashMap<>();

        public ThreadDatabases(int poolSize) {
            this.poolSize = poolSize;
        }

        /** This thread's PostgreSQL database. */
        public TestDatabase postgres() {
            return mine().postgres();
        }

        /** This thread's MariaDB database. */
        public TestDatabase mariadb() {
            return mine().mariadb();
        }

        private Databases mine() {
            return perThread.computeIfAbsent(Thread.currentThread(), t -> new Databases(poolSize));
        }

        @Override
        public void close() {
            perThread.values().forEach(Databases::close);
            perThread.clear();
        }
    }

    /** A test class's databases, each made on first use (a property may run on one only) and kept for its tries. */
    public static final class Databases implements AutoCloseable {
        private final int poolSize;
        private TestDatabase postgres;
        private TestDatabase mariadb;

        public Databases(int poolSize) {
            this.poolSize = poolSize;
        }

        public TestDatabase postgres() {
            if (postgres == null) {
                postgres = TestPostgres.shared().freshDatabase(poolSize);
            }
            return postgres;
        }

        public TestDatabase mariadb() {
            if (mariadb == null) {
                mariadb = TestMariaDb.shared().freshDatabase(poolSize);
            }
            return mariadb;
        }

        @Override
        public void close() {
            if (postgres != null) {
                postgres.close();
                postgres = null;
            }
            if (mariadb != null) {
                mariadb.close();
                mariadb = null;
            }
        }
    }
}
