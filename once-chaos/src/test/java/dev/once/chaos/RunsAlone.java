package dev.once.chaos;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Tag;

/**
 * A test class that measures throughput (a baseline rate, then how soon the rate is back after a
 * fault) and so must not share the machine with another test: its tag, {@value #TAG}, keeps it out
 * of this module's default surefire execution (two JVMs) and in an execution of its own, one JVM
 * after the others (once-testkit's pom.xml).
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@Tag(RunsAlone.TAG)
@interface RunsAlone {
    /** The JUnit tag the surefire executions select on. */
    String TAG = "runs-alone";
}
