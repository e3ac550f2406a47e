/**
 * once inside Spring-managed transactions: the claim and the outbox join the current transaction;
 * {@code @IdempotentListener} for Kafka, RabbitMQ, Spring Cloud GCP Pub/Sub and Spring Cloud AWS SQS listener methods.
 * The broker integrations are optional: each is read only when its library is present.
 */
module dev.once.spring {
    requires transitive dev.once.core;
    requires transitive spring.context;
    requires transitive spring.jdbc;
    requires transitive spring.tx;
    requires transitive spring.aop;
    requires transitive spring.beans;
    requires spring.core;
    requires spring.expression;
    requires org.slf4j;
    requires static micrometer.tracing; // optional: only OnceTracing uses it
    requires static spring.orm;
    requires static jakarta.persistence;
    requires static spring.messaging;
    requires static spring.kafka;
    requires static kafka.clients;
    requires static spring.amqp;
    requires static spring.rabbit;
    requires static com.rabbitmq.client;
    requires static spring.cloud.gcp.pubsub;
    requires static google.cloud.pubsub;
    requires static proto.google.cloud.pubsub.v1;
    requires static com.google.protobuf;
    requires static spring.integration.core;
    requires static spring.cloud.aws.sqs;

    exports dev.once.spring;

    // a Fence.check on a Spring transaction's connection is checked again before that transaction commits
    provides dev.once.internal.fence.TransactionFences with
            dev.once.spring.SpringTransactionFences;
}
