package dev.once.rabbitmq;

import dev.once.testsupport.SkipWhenUnreachable;
import java.io.IOException;
import java.io.UncheckedIOException;

/** Skips a class or property on RabbitMQ when none answers (see {@link SkipWhenUnreachable}). */
public final class SkipWithoutRabbitMq extends SkipWhenUnreachable {

    /** Made by JUnit or jqwik, from the annotation. */
    public SkipWithoutRabbitMq() {
        super("rabbitmq");
    }

    @Override
    protected void reach() {
        try {
            TestRabbit.connect().close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
