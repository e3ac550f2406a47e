package dev.once.scan;

/**
 * A message entry point and what the scan concluded about it.
 *
 * @param id       stable id: {@code file#member}
 * @param kind     what receives the messages: {@code @KafkaListener}, {@code KafkaConsumer.poll loop}, …
 * @param name     {@code Class.method}
 * @param location where the entry point is
 * @param ack      how and where it acknowledges, in words
 * @param dedupe   the dedupe recognised, or {@code none}
 * @param effects  how many effects its paths reach
 * @param blast    the heaviest effect reached, null if none
 * @param risk     sum of its findings' weights
 * @param score    0–100, 100 is safe
 */
public record Consumer(
        String id,
        String kind,
        String name,
        Location location,
        String ack,
        String dedupe,
        int effects,
        Blast blast,
        double risk,
        int score) {}
