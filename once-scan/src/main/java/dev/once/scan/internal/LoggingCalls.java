package dev.once.scan.internal;

import com.github.javaparser.ast.expr.MethodCallExpr;
import java.util.regex.Pattern;

/**
 * Calls on a logger: SLF4J's, Log4j's, Commons Logging's and java.util.logging's level methods on a receiver named as
 * a logger ({@code log}, {@code LOG}, {@code logger}, {@code LOGGER}, {@code this.log}). What such a call is given is
 * formatted into a line and kept nowhere else, so the calls that compute its arguments are part of the message.
 */
final class LoggingCalls {

    private static final Pattern RECEIVER = Pattern.compile("(?i)(this\\.)?_?\\w*(log|logger)");
    private static final Pattern LEVEL = Pattern.compile("trace|debug|info|warn|warning|error|fatal|severe|fine|log");

    private LoggingCalls() {}

    /** Whether {@code m} is a level call on a receiver named as a logger. */
    static boolean logger(MethodCallExpr m) {
        return LEVEL.matcher(m.getNameAsString()).matches()
                && m.getScope()
                        .map(x -> RECEIVER.matcher(x.toString()).matches())
                        .orElse(false);
    }
}
