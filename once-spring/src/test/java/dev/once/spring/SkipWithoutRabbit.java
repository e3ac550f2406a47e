package dev.once.spring;

import dev.once.testsupport.SkipWhenUnreachable;

/** Skips a jqwik property on RabbitMQ when none listens (see {@link SkipWhenUnreachable}). */
public final class SkipWithoutRabbit extends SkipWhenUnreachable {

    public SkipWithoutRabbit() {
        super("rabbitmq");
    }

    @Override
    protected void reach() {
        RabbitBeans.assumeRunning();
    }
}
