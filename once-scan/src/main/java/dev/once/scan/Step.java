package dev.once.scan;

/**
 * One hop on the path from an entry point to an effect: the method entered or the call made.
 *
 * @param name     {@code Class.method} or the call as written
 * @param location where the hop is
 */
public record Step(String name, Location location) {}
