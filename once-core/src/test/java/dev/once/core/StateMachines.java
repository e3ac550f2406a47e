package dev.once.core;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.function.Predicate;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.Transformer;

/** What the jqwik state machines of this package share. */
final class StateMachines {

    private StateMachines() {}

    /** A move drawn with an argument, named with it in the counterexample jqwik prints. */
    static <W, T> Action<W> move(Predicate<W> pre, Arbitrary<T> arg, String name, BiConsumer<W, T> body) {
        return new Action.Independent<>() {
            @Override
            public boolean precondition(W w) {
                return pre.test(w);
            }

            @Override
            public Arbitrary<Transformer<W>> transformer() {
                Function<T, Transformer<W>> t = a -> Transformer.mutate(name + " " + a, w -> body.accept(w, a));
                return arg.map(t);
            }
        };
    }

    /** A test class's databases, each made on first use (a property may run on one only) and kept for its tries. */
    static final class Databases implements AutoCloseable {
        private final int poolSize;
        private TestDatabase postgres;
        private TestDatabase mariadb;

        Databases(int poolSize) {
            this.poolSize = poolSize;
        }

        TestDatabase postgres() {
            if (postgres == null) {
                postgres = TestPostgres.shared().freshDatabase(poolSize);
            }
            return postgres;
        }

        TestDatabase mariadb() {
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
