package app;

import dev.once.IdempotentConsumer;
import dev.once.spring.OnceSpring;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * A Spring Boot application on the module path: the starter's auto-configuration migrates the schema,
 * builds OnceSpring on the application's DataSource, runs the relay and registers the health indicator
 * (from the starter's own module); an event is applied once.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
public class Main {

    private static String url;

    @Bean
    DataSource dataSource() {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(url);
        return ds;
    }

    @Bean
    PlatformTransactionManager transactionManager(DataSource dataSource) {
        return new DataSourceTransactionManager(dataSource);
    }

    public static void main(String[] args) throws Exception {
        url = args[0];
        SpringApplication boot = new SpringApplication(Main.class);
        boot.setWebApplicationType(WebApplicationType.NONE);
        try (ConfigurableApplicationContext context = boot.run("--once.schema.initialize-schema=always")) {
            OnceSpring once = context.getBean(OnceSpring.class);
            JdbcTemplate jdbc = new JdbcTemplate(context.getBean(DataSource.class));
            jdbc.execute("CREATE TABLE effects (event_id text PRIMARY KEY)");
            IdempotentConsumer billing = once.consumer(
                    "module-path", (delivery, tx) -> jdbc.update("INSERT INTO effects VALUES (?)", delivery.eventId()));
            System.out.println("first=" + process(once, billing, "evt-1"));
            System.out.println("second=" + process(once, billing, "evt-1"));
            System.out.println("effects=" + jdbc.queryForObject("SELECT count(*) FROM effects", Integer.class));

            // the line's HealthIndicator (Boot 3 and 4 name it differently); both have health() and getStatus()
            Object indicator = context.getBean("onceHealthIndicator");
            Object health = indicator.getClass().getInterfaces()[0].getMethod("health").invoke(indicator);
            System.out.println("health=" + health.getClass().getMethod("getStatus").invoke(health));
            System.out.println("modules=" + OnceSpring.class.getModule().getName() + ","
                    + Main.class.getModule().getLayer().findModule("dev.once.spring.boot.autoconfigure").isPresent()
                    + "," + indicator.getClass().getModule().getName());
        }
    }

    private static String process(OnceSpring once, IdempotentConsumer consumer, String eventId) {
        return once.transactionTemplate()
                .execute(status -> consumer.process(dev.once.Delivery.builder(eventId).build()).tag());
    }
}
