package dev.once.testkit.internal;

import dev.once.testkit.kafka.TestKafka;
import java.util.ArrayList;
import java.util.List;

/**
 * One broker for every test JVM of a build (CI's {@code .ci/run}): the embedded broker of {@link
 * TestKafka}, same settings, run in this JVM by {@link KafkaNodes} until stdin ends. The build
 * exports its {@code READY} answer's bootstrap servers as {@value TestKafka#BOOTSTRAP_ENV}, so each
 * test JVM reuses it instead of starting its own (about ten starts per build otherwise).
 *
 * <p>Run on the test kit's class path: {@code java -cp <it> dev.once.testkit.internal.SharedKafka}.
 * Not API.
 */
public final class SharedKafka {

    private SharedKafka() {}

    public static void main(String[] args) throws Exception {
        List<String> nodes = new ArrayList<>(List.of("combined", "1"));
        TestKafka.BROKER_SETTINGS.forEach((key, value) -> nodes.add(key + "=" + value));
        KafkaNodes.main(nodes.toArray(String[]::new));
    }
}
