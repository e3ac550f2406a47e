package dev.once.nats;

import dev.once.testsupport.SkipWhenUnreachable;

/** Skips a class or property on NATS when no JetStream server answers (see {@link SkipWhenUnreachable}). */
public final class SkipWithoutNats extends SkipWhenUnreachable {

    /** Made by JUnit or jqwik, from the annotation. */
    public SkipWithoutNats() {
        super("nats");
    }

    @Override
    protected void reach() {
        try {
            TestNats.connect().close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
