package dev.once.spring;

import dev.once.spring.jpa.Payment;
import javax.sql.DataSource;
import org.springframework.orm.jpa.LocalContainerEntityManagerFactoryBean;
import org.springframework.orm.jpa.vendor.HibernateJpaVendorAdapter;

/**
 * The JPA entities of {@code dev.once.spring.jpa} on a DataSource, for the tests that use JPA. Apart from {@link
 * TestBeans}: the Boot 3 starter runs some of once-spring's Kafka tests on a classpath without spring-orm, where a
 * class naming JPA types fails to load.
 */
final class TestJpaBeans {

    private TestJpaBeans() {}

    /** A Hibernate entity manager factory of {@code dev.once.spring.jpa}'s entities ({@link Payment}) on {@code ds}. */
    static LocalContainerEntityManagerFactoryBean paymentEntities(DataSource ds) {
        LocalContainerEntityManagerFactoryBean f = new LocalContainerEntityManagerFactoryBean();
        f.setDataSource(ds);
        f.setPackagesToScan(Payment.class.getPackageName());
        f.setJpaVendorAdapter(new HibernateJpaVendorAdapter());
        return f;
    }
}
