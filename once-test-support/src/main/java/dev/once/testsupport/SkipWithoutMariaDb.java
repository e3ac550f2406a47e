package dev.once.testsupport;

/** Skips a jqwik property on MariaDB when {@link TestMariaDb} has none (see {@link SkipWhenUnreachable}). */
public final class SkipWithoutMariaDb extends SkipWhenUnreachable {

    /** Made by jqwik, from the annotation. */
    public SkipWithoutMariaDb() {
        super("mariadb");
    }

    @Override
    protected void reach() {
        TestMariaDb.shared();
    }
}
