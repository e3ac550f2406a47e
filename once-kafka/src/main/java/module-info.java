/** Kafka: a consumer runner that claims each record with its effect, and an outbox publisher. */
module dev.once.kafka {
    requires transitive dev.once.core;
    requires transitive kafka.clients;
    requires org.slf4j;

    exports dev.once.kafka;
}
