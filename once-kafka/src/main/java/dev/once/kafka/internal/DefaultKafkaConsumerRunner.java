package dev.once.kafka.internal;

import dev.once.kafka.KafkaConsumerRunner;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The runner behind {@link KafkaConsumerRunner}: one {@link PollLoop} per thread, one dead-letter producer. Not API. */
public final class DefaultKafkaConsumerRunner implements KafkaConsumerRunner {

    private static final Logger log = LoggerFactory.getLogger(DefaultKafkaConsumerRunner.class);

    private final RunnerSettings settings;
    private final KafkaRunnerMetrics metrics;
    private final List<PollLoop> loops = new ArrayList<>();
    private Producer<byte[], byte[]> deadLetters;
    private boolean started;
    private boolean closed;

    public DefaultKafkaConsumerRunner(RunnerSettings settings) {
        this.settings = settings;
        this.metrics = new KafkaRunnerMetrics(
                settings.meterRegistry(), settings.idempotentConsumer().consumer(), settings.groupId());
    }

    @Override
    public synchronized KafkaConsumerRunner start() {
        if (started || closed) {
            throw new IllegalStateException("a runner starts once; this one was already "
                    + (closed ? "closed" : "started") + "; build a new one");
        }
        started = true;
        if (settings.deadLetterTopic() != null) {
            deadLetters = new KafkaProducer<>(
                    settings.producerProperties(), new ByteArraySerializer(), new ByteArraySerializer());
        }
        String base = "once-kafka-" + settings.idempotentConsumer().consumer();
        for (int i = 0; i < settings.threads(); i++) {
            String name = base + "-" + i;
            PollLoop loop = new PollLoop(settings, metrics, deadLetters, name);
            loops.add(loop);
            Thread t = new Thread(loop, name + "-poll");
            t.setDaemon(true);
            t.start();
        }
        return this;
    }

    @Override
    public synchronized boolean isRunning() {
        return started && !closed && loops.stream().allMatch(PollLoop::isRunning);
    }

    @Override
    public synchronized Optional<Throwable> failure() {
        return loops.stream().map(PollLoop::failure).filter(f -> f != null).findFirst();
    }

    @Override
    public void close() {
        close(settings.closeTimeout());
    }

    @Override
    public synchronized void close(Duration timeout) {
        if (closed) {
            return;
        }
        closed = true;
        loops.forEach(l -> l.stop(timeout));
        // A loop waits for its batch up to the timeout, then leaves the group (consumer close).
        Duration wait = timeout.plus(settings.pollTimeout()).plusSeconds(30);
        try {
            for (PollLoop l : loops) {
                if (!l.awaitStopped(wait)) {
                    log.warn(
                            "a poll loop of consumer {} did not stop within {}",
                            settings.idempotentConsumer().consumer(),
                            wait);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (deadLetters != null) {
                deadLetters.close();
            }
        }
    }
}
