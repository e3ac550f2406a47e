package dev.once.testsupport;

import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.SkipExecutionHook;
import org.opentest4j.TestAbortedException;

/**
 * Skips a jqwik property on MariaDB, with {@link TestMariaDb}'s reason, when none is reachable:
 * {@code @AddLifecycleHook(SkipWithoutMariaDb.class)}. Needed because jqwik counts a skip inside a
 * try ({@link TestMariaDb#shared()} aborting) as a rejected try, and a property whose every try was
 * rejected fails as exhausted. Under {@value Services#REQUIRE_ENV}{@code =mariadb} the property runs
 * and fails on the missing server.
 */
@SuppressWarnings("exports")
public final class SkipWithoutMariaDb implements SkipExecutionHook {

    /** Made by jqwik, from the annotation. */
    public SkipWithoutMariaDb() {}

    @Override
    public SkipResult shouldBeSkipped(LifecycleContext context) {
        if (Services.required("mariadb")) {
            return SkipResult.doNotSkip();
        }
        try {
            TestMariaDb.shared();
            return SkipResult.doNotSkip();
        } catch (TestAbortedException e) {
            return SkipResult.skip(e.getMessage());
        }
    }
}
