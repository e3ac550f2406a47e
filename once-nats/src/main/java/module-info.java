/** NATS JetStream: a consumer that acknowledges after commit, and an outbox publisher. */
module dev.once.nats {
    requires transitive dev.once.core;
    requires transitive io.nats.jnats;
    requires org.slf4j;

    exports dev.once.nats;
}
