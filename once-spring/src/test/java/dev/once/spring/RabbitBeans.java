package dev.once.spring;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import org.junit.jupiter.api.Assumptions;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The RabbitMQ beans once-spring's {@code @RabbitListener} tests build alike, on the broker at 127.0.0.1:5672: its
 * {@code CachingConnectionFactory}, a {@code RabbitAdmin} and a {@code RabbitTemplate} on it. A test's configuration
 * imports it and adds its queues and listener container factories.
 */
@Configuration(proxyBeanMethods = false)
class RabbitBeans {

    @Bean
    CachingConnectionFactory connectionFactory() {
        return new CachingConnectionFactory("127.0.0.1", 5672);
    }

    @Bean
    RabbitAdmin rabbitAdmin(CachingConnectionFactory cf) {
        return new RabbitAdmin(cf);
    }

    @Bean
    RabbitTemplate rabbitTemplate(CachingConnectionFactory cf) {
        return new RabbitTemplate(cf);
    }

    /** Aborts the test (skipped, not failed) when no RabbitMQ listens there, unless ONCE_REQUIRE_SERVICES is set. */
    static void assumeRunning() {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", 5672), 1000);
        } catch (IOException e) {
            if (System.getenv("ONCE_REQUIRE_SERVICES") == null) {
                Assumptions.abort("RabbitMQ is not listening on 127.0.0.1:5672 (rabbitmq-server -detached)");
            }
        }
    }
}
