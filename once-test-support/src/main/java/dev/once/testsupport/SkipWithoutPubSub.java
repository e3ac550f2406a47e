package dev.once.testsupport;

/** Skips a jqwik property on Pub/Sub when {@link TestPubSubEmulator} has no emulator (see {@link SkipWhenUnreachable}). */
public final class SkipWithoutPubSub extends SkipWhenUnreachable {

    /** Made by jqwik, from the annotation. */
    public SkipWithoutPubSub() {
        super("pubsub");
    }

    @Override
    protected void reach() {
        TestPubSubEmulator.host();
    }
}
