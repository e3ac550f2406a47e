package dev.once.spring.boot;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.kafka.config.AbstractKafkaListenerContainerFactory;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Warns at startup of each Kafka listener container factory whose containers run their listeners in transactions of
 * a database transaction manager ({@code ContainerProperties.setTransactionManager} with anything but a {@code
 * KafkaAwareTransactionManager}): spring-kafka then commits the records' offsets inside that transaction, before it
 * commits (spring-kafka issue 2775; for a batch listener under every ack mode), so a commit that fails afterwards
 * leaves records acknowledged and not applied, the hazard docs/spring.md warns of. A warning, not a refusal: the
 * factory may serve listeners once has no part in, and an application that runs so today keeps starting. A Kafka or
 * chained Kafka transaction manager, or none, is not warned of.
 */
final class KafkaContainerTransactionCheck implements SmartInitializingSingleton {

    private static final Logger log = LoggerFactory.getLogger(KafkaContainerTransactionCheck.class);

    private final ListableBeanFactory beans;

    KafkaContainerTransactionCheck(ListableBeanFactory beans) {
        this.beans = beans;
    }

    @Override
    @SuppressWarnings({"rawtypes", "removal"}) // every factory, whatever its types; the setter's value, to be removed
    public void afterSingletonsInstantiated() {
        beans.getBeansOfType(AbstractKafkaListenerContainerFactory.class, false, false)
                .forEach((name, factory) -> {
                    PlatformTransactionManager tm;
                    try {
                        tm = factory.getContainerProperties().getTransactionManager();
                    } catch (NoSuchMethodError removed) {
                        return; // a spring-kafka without the setter: no container runs in such a transaction
                    }
                    if (tm != null && !(tm instanceof KafkaAwareTransactionManager)) {
                        log.warn(
                                "Kafka listener container factory '{}' runs its listeners in transactions of {}, a"
                                        + " database transaction manager (ContainerProperties.setTransactionManager):"
                                        + " spring-kafka then commits the records' offsets inside that transaction,"
                                        + " before it commits, so a commit that fails afterwards (a constraint"
                                        + " checked at commit, a serialization failure, a lost connection) leaves"
                                        + " records acknowledged and not applied (spring-kafka issue 2775). Remove"
                                        + " the transaction manager from the factory: an @IdempotentListener begins"
                                        + " its transaction inside the listener call, so the offset follows the"
                                        + " commit; for Kafka transactions, set a KafkaTransactionManager with"
                                        + " setKafkaAwareTransactionManager instead (docs/spring.md)",
                                name,
                                tm.getClass().getSimpleName());
                    }
                });
    }
}
