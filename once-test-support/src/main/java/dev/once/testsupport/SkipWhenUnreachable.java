package dev.once.testsupport;

import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.SkipExecutionHook;
import org.opentest4j.TestAbortedException;

/**
 * Skips a jqwik property, with the service's own reason, when the service it needs is unreachable:
 * {@code @AddLifecycleHook(SkipWithoutMariaDb.class)}. Needed because jqwik counts a skip inside a try
 * (the service's check aborting) as a rejected try, and a property whose every try was rejected fails as
 * exhausted. Where {@value Services#REQUIRE_ENV} lists the service, the property runs and fails on it.
 */
@SuppressWarnings("exports")
public abstract class SkipWhenUnreachable implements SkipExecutionHook {

    private final String service;

    /** @param service the name {@value Services#REQUIRE_ENV} lists it by, e.g. {@code mariadb} */
    protected SkipWhenUnreachable(String service) {
        this.service = service;
    }

    /** Returns when the service answers; aborts (a {@link TestAbortedException}) with what to do when it does not. */
    protected abstract void reach();

    @Override
    public final SkipResult shouldBeSkipped(LifecycleContext context) {
        if (Services.required(service)) {
            return SkipResult.doNotSkip();
        }
        try {
            reach();
            return SkipResult.doNotSkip();
        } catch (TestAbortedException e) {
            return SkipResult.skip(e.getMessage());
        }
    }
}
