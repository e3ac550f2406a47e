package dev.once.kafka;

import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.kafka.internal.DatabaseOffsets;
import dev.once.kafka.internal.DefaultKafkaConsumerRunner;
import dev.once.kafka.internal.OrderGuard;
import dev.once.kafka.internal.RunnerSettings;
import dev.once.tx.TransactionProvider;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * Puts a runner together from the settings of a {@link KafkaConsumerRunnerBuilder} that
 * {@link RunnerChecks} passed: the idempotent consumer behind its {@link OrderGuard} (unless one
 * was prebuilt), the offsets kept in the database, the dead-letter producer's properties, and the
 * copied {@link RunnerSettings}.
 */
final class RunnerAssembly {

    private RunnerAssembly() {}

    /**
     * @param props  the checked consumer properties ({@link RunnerChecks#consumerProperties})
     * @param revoke the checked revoke timeout ({@link RunnerChecks#revokeTimeout})
     */
    static KafkaConsumerRunner assemble(KafkaConsumerRunnerBuilder b, Map<String, Object> props, Duration revoke) {
        OrderGuard guard = null;
        DatabaseOffsets offsets = null;
        IdempotentConsumer idempotent = b.prebuilt;
        if (idempotent == null) {
            offsets = b.offsetsInDatabase
                    ? new DatabaseOffsets(b.dataSource, String.valueOf(props.get(ConsumerConfig.GROUP_ID_CONFIG)))
                    : null;
            guard = b.handler != null ? new OrderGuard(b.handler, offsets) : new OrderGuard(b.batchHandler, offsets);
            IdempotentConsumerBuilder ib = IdempotentConsumer.builder();
            // The guard's transactions: it follows what each applied, and writes the offsets in them.
            TransactionProvider transactions = guard.transactions(b.dataSource);
            ib.transactions(transactions).consumer(b.consumer).meterRegistry(b.meterRegistry);
            if (b.consumerSettings != null) {
                b.consumerSettings.accept(ib);
            }
            ib.transactions(transactions).consumer(b.consumer);
            idempotent = (b.handler != null ? ib.handler(guard) : ib.batchHandler(guard)).build();
            guard.bind(idempotent.inbox(), b.consumer);
        }
        return new DefaultKafkaConsumerRunner(new RunnerSettings(
                props,
                List.copyOf(b.topics),
                idempotent,
                guard,
                b.eventIdExtractor,
                b.missingEventIdPolicy,
                b.deadLetterTopic,
                deadLetterProducerProperties(props, b.producerProperties),
                b.retryPolicy,
                b.threads,
                b.maxBatchRecords != null
                        ? b.maxBatchRecords
                        : Math.min(
                                KafkaConsumerRunnerBuilder.MAX_BATCH_RECORDS,
                                KafkaConsumerRunnerBuilder.DEFAULT_MAX_BATCH_POLLS
                                        * RunnerChecks.intProperty(
                                                props,
                                                ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                                                KafkaConsumerRunnerBuilder.DEFAULT_MAX_POLL_RECORDS)),
                b.pollTimeout,
                revoke,
                b.closeTimeout,
                b.meterRegistry,
                b.afterDatabaseCommit,
                offsets));
    }

    /**
     * The dead-letter producer's properties: the consumer's {@code bootstrap.servers} and security
     * settings, {@code acks=all}, idempotence on, then what was given.
     */
    private static Map<String, Object> deadLetterProducerProperties(
            Map<String, Object> consumerProps, Map<String, Object> given) {
        Map<String, Object> p = new HashMap<>();
        consumerProps.forEach((k, v) -> {
            if (k.equals(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG)
                    || k.startsWith("security.")
                    || k.startsWith("ssl.")
                    || k.startsWith("sasl.")) {
                p.put(k, v);
            }
        });
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.putAll(given);
        return Map.copyOf(p);
    }
}
