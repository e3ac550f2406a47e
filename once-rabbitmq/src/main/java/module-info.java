/** RabbitMQ: a consumer that acknowledges after commit, and an outbox publisher with confirms. */
module dev.once.rabbitmq {
    requires transitive dev.once.core;
    requires transitive com.rabbitmq.client;
    requires org.slf4j;

    exports dev.once.rabbitmq;
}
