package dev.once.scan;

/**
 * A place that explains a finding: where the message is acknowledged, where the effect is, where
 * the transaction or the setting is.
 *
 * @param role     {@code entry point}, {@code ack}, {@code effect}, {@code transaction}, {@code setting}
 * @param location the place
 */
public record Related(String role, Location location) {}
