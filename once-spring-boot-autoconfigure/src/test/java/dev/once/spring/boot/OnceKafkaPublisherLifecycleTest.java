package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.ProducerFactory;

/**
 * The Kafka publisher the starter builds for the relay owns a producer of its own: closing the
 * application context closes it. It was left running (its network thread retried a broker that
 * had gone away, for as long as the JVM lived).
 */
class OnceKafkaPublisherLifecycleTest {

    @Test
    void closingTheContextClosesTheRelaysKafkaProducer() {
        String clientId = "once-lifecycle-" + System.nanoTime();
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(OnceKafkaAutoConfiguration.class))
                .withBean(
                        ProducerFactory.class,
                        () -> new DefaultKafkaProducerFactory<>(Map.of(
                                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                                "127.0.0.1:9", // nothing listens
                                ProducerConfig.CLIENT_ID_CONFIG,
                                clientId,
                                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
                                ByteArraySerializer.class,
                                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
                                ByteArraySerializer.class)))
                .run(context -> {
                    assertThat(context).hasNotFailed().hasBean("onceKafkaPublisher");
                    assertThat(producerThreads(clientId))
                            .as("the publisher's producer runs")
                            .isPositive();
                });
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(producerThreads(clientId))
                        .as("the producer's network thread is gone with the context")
                        .isZero());
    }

    private static long producerThreads(String clientId) {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().contains(clientId))
                .count();
    }
}
