package dev.once.scan.internal;

import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.stmt.BlockStmt;
import java.util.Set;

/**
 * The failure types of a wait on a future, as {@code java.util.concurrent} documents them: {@code Future.get} throws
 * {@code ExecutionException} when the work failed, {@code TimeoutException} when it did not finish in time and {@code
 * CancellationException} when it was cancelled; {@code CompletableFuture.join} throws {@code CompletionException} and
 * {@code CancellationException}. A catch of these around a wait on the work catches every way the work can fail (the
 * send the broker refused, the call that timed out), as a catch of {@code Exception} does: one that only logs consumes
 * the message with its work undone.
 */
final class FutureFailures {

    private static final Set<String> FAILURES = Set.of(
            "ExecutionException",
            "CompletionException",
            "CancellationException",
            "TimeoutException",
            "java.util.concurrent.ExecutionException",
            "java.util.concurrent.CompletionException",
            "java.util.concurrent.CancellationException",
            "java.util.concurrent.TimeoutException");

    private FutureFailures() {}

    /** Whether a catch type is one a wait on a future fails with. */
    static boolean isFailureOfWait(String type) {
        return FAILURES.contains(type);
    }

    /**
     * Whether the block waits on a future: a {@code join()}, a {@code get()} without arguments on a call's result (not
     * a map's {@code get(key)}), or a timed {@code get(timeout, unit)}.
     */
    static boolean waitsIn(BlockStmt block) {
        return !block.findAll(MethodCallExpr.class, FutureFailures::waitOnFuture)
                .isEmpty();
    }

    private static boolean waitOnFuture(MethodCallExpr c) {
        String n = c.getNameAsString();
        if (n.equals("join")) {
            return c.getArguments().isEmpty() && c.getScope().isPresent();
        }
        if (n.equals("get")) {
            return c.getArguments().size() == 2
                    || c.getArguments().isEmpty()
                            && c.getScope().filter(x -> x.isMethodCallExpr()).isPresent();
        }
        return false;
    }
}
