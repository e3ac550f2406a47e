package app;

import dev.once.IdempotentConsumer;
import dev.once.Schema;
import dev.once.spring.EnableIdempotentListeners;
import dev.once.spring.IdempotentListenerPostProcessor;
import dev.once.spring.OnceSpring;
import org.postgresql.ds.PGSimpleDataSource;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;

/**
 * A user's application on the module path: the claim and a JdbcTemplate write join one Spring
 * transaction (applied once, a rolled-back try leaves nothing), and a context with
 * {@code @EnableIdempotentListeners} starts.
 */
public final class Main {
    public static void main(String[] args) throws Exception {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(args[0]);
        Schema.migrate(ds); // reads the migrations from inside dev.once.core
        OnceSpring once = OnceSpring.builder()
                .dataSource(ds)
                .transactionManager(new DataSourceTransactionManager(ds))
                .build();
        JdbcTemplate jdbc = new JdbcTemplate(ds);
        jdbc.execute("CREATE TABLE effects (event_id text PRIMARY KEY)");
        IdempotentConsumer billing = once.consumer(
                "module-path", (delivery, tx) -> jdbc.update("INSERT INTO effects VALUES (?)", delivery.eventId()));

        System.out.println("first=" + inTransaction(once, billing, "evt-1", false));
        System.out.println("second=" + inTransaction(once, billing, "evt-1", false));
        inTransaction(once, billing, "evt-2", true);
        System.out.println("after rollback=" + inTransaction(once, billing, "evt-2", false));
        System.out.println("effects=" + jdbc.queryForObject("SELECT count(*) FROM effects", Integer.class));

        try (AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext(Listeners.class)) {
            System.out.println("post-processor=" + context.getBeanNamesForType(IdempotentListenerPostProcessor.class).length);
        }
        Module spring = OnceSpring.class.getModule();
        System.out.println("modules=" + IdempotentConsumer.class.getModule().getName() + "," + spring.getName());
    }

    private static String inTransaction(OnceSpring once, IdempotentConsumer consumer, String eventId, boolean rollBack) {
        return once.transactionTemplate().execute(status -> {
            String tag = consumer.process(dev.once.Delivery.builder(eventId).build()).tag();
            if (rollBack) {
                status.setRollbackOnly();
            }
            return tag;
        });
    }

    @EnableIdempotentListeners
    static class Listeners {}
}
