package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.transaction.KafkaTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * A Kafka listener container factory whose containers run in a database transaction manager's transactions is
 * warned of at startup, by its bean name and with what to do (spring-kafka commits the offsets before the database
 * commits); a factory with a Kafka transaction manager, or none, is not.
 */
@ExtendWith(OutputCaptureExtension.class)
class KafkaContainerTransactionCheckTest {

    static TestDatabase db;
    static String url;

    @BeforeAll
    static void database() {
        db = TestPostgres.shared().freshDatabase(4);
        url = ((HikariDataSource) db.dataSource()).getJdbcUrl();
    }

    @AfterAll
    static void drop() {
        db.close();
    }

    private static ApplicationContextRunner boot(Class<?> factories) {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(
                        Boot.DATA_SOURCE, Boot.DATA_SOURCE_TRANSACTION_MANAGER, OnceAutoConfiguration.class))
                .withUserConfiguration(factories)
                .withPropertyValues(
                        "spring.datasource.url=" + url, "once.relay.enabled=false", "once.retention.enabled=false");
    }

    @Test
    void aFactoryWithADatabaseTransactionManagerIsWarnedOfByName(CapturedOutput output) {
        boot(DatabaseTransactions.class).run(context -> {
            assertThat(context).hasNotFailed();
            String tm =
                    context.getBean(PlatformTransactionManager.class).getClass().getSimpleName();
            assertThat(output)
                    .contains("Kafka listener container factory 'paymentsContainerFactory' runs its listeners in"
                            + " transactions of " + tm + ", a database transaction manager")
                    .contains("Remove the transaction manager from the factory")
                    .doesNotContain("'auditContainerFactory'");
        });
    }

    @Test
    void aFactoryWithAKafkaTransactionManagerOrNoneIsNot(CapturedOutput output) {
        boot(KafkaTransactions.class).run(context -> assertThat(context).hasNotFailed());
        assertThat(output).doesNotContain("Kafka listener container factory '");
    }

    static ConcurrentKafkaListenerContainerFactory<String, String> factory() {
        return new ConcurrentKafkaListenerContainerFactory<>();
    }

    static KafkaTransactionManager<String, String> kafkaTransactions() {
        var producers = new DefaultKafkaProducerFactory<String, String>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9", // never used: nothing is sent
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class));
        producers.setTransactionIdPrefix("check-");
        return new KafkaTransactionManager<>(producers);
    }

    @Configuration(proxyBeanMethods = false)
    static class DatabaseTransactions {
        @Bean
        @SuppressWarnings({"deprecation", "removal"}) // the setter the hazard comes through
        ConcurrentKafkaListenerContainerFactory<String, String> paymentsContainerFactory(
                PlatformTransactionManager tm) {
            var f = factory();
            f.getContainerProperties().setTransactionManager(tm);
            return f;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> auditContainerFactory() {
            return factory();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class KafkaTransactions {
        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> kafkaAwareContainerFactory() {
            var f = factory();
            f.getContainerProperties().setKafkaAwareTransactionManager(kafkaTransactions());
            return f;
        }

        @Bean
        @SuppressWarnings({"deprecation", "removal"}) // a Kafka transaction manager through the older setter: as safe
        ConcurrentKafkaListenerContainerFactory<String, String> legacyKafkaContainerFactory() {
            var f = factory();
            f.getContainerProperties().setTransactionManager(kafkaTransactions());
            return f;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> plainContainerFactory() {
            return factory();
        }
    }
}
