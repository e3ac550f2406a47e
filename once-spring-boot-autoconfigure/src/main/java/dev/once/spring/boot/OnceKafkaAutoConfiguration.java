package dev.once.spring.boot;

import dev.once.kafka.KafkaPublisher;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.core.ProducerFactory;

/**
 * With once-kafka and spring-kafka on the class path and a {@code ProducerFactory} bean (Boot's Kafka
 * auto-configuration makes one from {@code spring.kafka.*}): outbox rows whose destination is not a URL
 * are published to the Kafka topic of that name, with the producer settings of the application, made
 * idempotent with {@code acks=all}.
 */
@AutoConfiguration(
        before = OnceAutoConfiguration.class,
        afterName = { // Boot 4, Boot 3
            "org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration",
            "org.springframework.boot.autoconfigure.kafka.KafkaAutoConfiguration"
        })
@ConditionalOnBooleanProperty(name = "once.enabled", matchIfMissing = true)
@ConditionalOnClass({KafkaPublisher.class, ProducerFactory.class})
public class OnceKafkaAutoConfiguration {

    @Bean(destroyMethod = "close") // its producer is its own: the context closes it
    @ConditionalOnBean(ProducerFactory.class)
    @ConditionalOnMissingBean(name = "onceKafkaPublisher")
    OncePublishers.BrokerPublisher onceKafkaPublisher(ProducerFactory<?, ?> producerFactory) {
        KafkaPublisher kafka = KafkaPublisher.create(producerFactory.getConfigurationProperties());
        return new OncePublishers.BrokerPublisher("kafka", destination -> !destination.contains("://"), kafka);
    }
}
