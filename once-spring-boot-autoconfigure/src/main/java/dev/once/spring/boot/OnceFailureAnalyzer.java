package dev.once.spring.boot;

import dev.once.InvalidConfigurationException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Puts once's refusals to start (a missing or outdated schema, an {@code @IdempotentListener}
 * whose {@code eventId} does not fit its method, a bad setting) at the top of Boot's "APPLICATION
 * FAILED TO START" report. Without it the message that names the fix sat several "Caused by" deep
 * in a bean-creation stack trace.
 */
final class OnceFailureAnalyzer extends AbstractFailureAnalyzer<InvalidConfigurationException> {

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, InvalidConfigurationException cause) {
        return new FailureAnalysis(
                "once refused to start: " + cause.getMessage(),
                "Do what the description names; once's settings (once.*) are listed in docs/spring.md.",
                cause);
    }
}
