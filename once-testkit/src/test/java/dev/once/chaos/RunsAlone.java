package dev.once.chaos;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A test class that measures throughput (a baseline rate, then how soon the rate is back after a
 * fault) and so must not share the machine with another test: while it runs, {@link TestJvmLock}
 * keeps every class of this module's other test JVM waiting.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@interface RunsAlone {}
