package dev.once.testsupport;

import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.SkipExecutionHook;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.opentest4j.TestAbortedException;

/**
 * Skips a jqwik property, with the service's own reason, when the service it needs is unreachable:
 * {@code @AddLifecycleHook(SkipWithoutMariaDb.class)}; on a JUnit class, {@code @ExtendWith(…)} skips the whole
 * class before any {@code @BeforeEach} or {@code @AfterEach} runs (a tear-down of what a skipped set-up never made
 * would fail the skipped test). Needed because jqwik counts a skip inside a try
 * (the service's check aborting) as a rejected try, and a property whose every try was rejected fails as
 * exhausted. Where {@value Services#REQUIRE_ENV} lists the service, the property runs and fails on it.
 */
@SuppressWarnings("exports")
public abstract class SkipWhenUnreachable implements SkipExecutionHook, ExecutionCondition {

    private final String service;

    /** @param service the name {@value Services#REQUIRE_ENV} lists it by, e.g. {@code mariadb} */
    protected SkipWhenUnreachable(String service) {
        this.service = service;
    }

    /** Returns when the service answers; aborts (a {@link TestAbortedException}) with what to do when it does not. */
    protected abstract void reach();

    @Override
    public final SkipResult shouldBeSkipped(LifecycleContext context) {
        String why = unreachable();
        return why == null ? SkipResult.doNotSkip() : SkipResult.skip(why);
    }

    @Override
    public final ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        String why = unreachable();
        return why == null
                ? ConditionEvaluationResult.enabled(service + " answers")
                : ConditionEvaluationResult.disabled(why);
    }

    /** Why the tests are skipped, or null to run them (the service answers, or it is required). */
    private String unreachable() {
        if (Services.required(service)) {
            return null;
        }
        try {
            reach();
            return null;
        } catch (TestAbortedException e) {
            return e.getMessage();
        }
    }
}
