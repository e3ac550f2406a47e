package dev.once.rabbitmq;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import java.util.List;
import java.util.function.Consumer;

/** An engine whose batches are shown to a test before the engine processes them, as the consumer hands them over. */
final class Watched {

    private Watched() {}

    /** {@code engine}, with {@code taken} told of every batch (a single delivery is a batch of one) first. */
    static IdempotentConsumer consumer(IdempotentConsumer engine, Consumer<List<Delivery>> taken) {
        return new IdempotentConsumer() {
            @Override
            public String consumer() {
                return engine.consumer();
            }

            @Override
            public Inbox inbox() {
                return engine.inbox();
            }

            @Override
            public Outcome process(Delivery d) {
                return processBatch(List.of(d)).get(0);
            }

            @Override
            public List<Outcome> processBatch(List<Delivery> ds) {
                taken.accept(ds);
                return engine.processBatch(ds);
            }
        };
    }
}
