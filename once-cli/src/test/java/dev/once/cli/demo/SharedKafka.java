package dev.once.cli.demo;

import dev.once.testkit.Services;

/** One embedded Kafka broker for every demo test of this JVM, started on first use. */
final class SharedKafka {

    private static EmbeddedKafka kafka;

    private SharedKafka() {
    }

    static synchronized String bootstrap() {
        if (kafka == null) {
            try {
                EmbeddedKafka k = EmbeddedKafka.start();
                Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                    try {
                        k.close();
                    } catch (Exception ignored) {
                        // the JVM is exiting
                    }
                }, "once-cli-test-kafka-stop"));
                kafka = k;
            } catch (Exception e) {
                throw Services.unavailable("kafka", "the embedded KRaft broker must start in this JVM", e);
            }
        }
        return kafka.bootstrapServers();
    }
}
