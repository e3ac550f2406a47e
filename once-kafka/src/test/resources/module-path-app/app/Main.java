package app;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Schema;
import dev.once.kafka.KafkaConsumerRunner;
import java.util.concurrent.atomic.AtomicInteger;
import org.postgresql.ds.PGSimpleDataSource;

/** A user's application on the module path: migrates, applies one event delivered twice, reports. */
public final class Main {
    public static void main(String[] args) throws Exception {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(args[0]);
        Schema.migrate(ds); // reads the migrations from inside dev.once.core
        AtomicInteger effects = new AtomicInteger();
        IdempotentConsumer billing = IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("module-path")
                .handler((delivery, tx) -> effects.incrementAndGet())
                .build();
        System.out.println("first=" + billing.process(Delivery.builder("evt-1").build()).tag());
        System.out.println("second=" + billing.process(Delivery.builder("evt-1").build()).tag());
        System.out.println("effects=" + effects.get());
        Module core = IdempotentConsumer.class.getModule();
        System.out.println("modules=" + core.getName() + "," + KafkaConsumerRunner.class.getModule().getName());
        System.out.println("internal exported=" + core.isExported("dev.once.internal"));
    }
}
