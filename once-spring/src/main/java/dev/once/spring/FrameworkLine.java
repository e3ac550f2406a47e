package dev.once.spring;

import dev.once.InvalidConfigurationException;
import org.springframework.core.SpringVersion;
import org.springframework.transaction.support.TransactionSynchronization;

/**
 * once follows a transaction's savepoints ({@code NESTED} propagation) through
 * {@link TransactionSynchronization#savepoint} and {@link TransactionSynchronization#savepointRollback},
 * which Spring Framework has since 6.2 (Boot 3.4). On an older Framework the calls never come: a
 * {@code NESTED} step rolled back to its savepoint would keep its outbox rows and claims in once's state,
 * to be written and acknowledged as if the step had committed. Such a Framework is refused at startup.
 */
final class FrameworkLine {

    private FrameworkLine() {}

    static void requireSavepointCallbacks() {
        requireSavepointCallbacks(TransactionSynchronization.class, SpringVersion.getVersion());
    }

    /** {@code synchronization} stands for the Framework's {@code TransactionSynchronization} (tests pass an older shape). */
    static void requireSavepointCallbacks(Class<?> synchronization, String frameworkVersion) {
        for (String callback : new String[] {"savepoint", "savepointRollback"}) {
            try {
                synchronization.getMethod(callback, Object.class);
            } catch (NoSuchMethodException e) {
                throw new InvalidConfigurationException("once-spring needs Spring Framework 6.2 or newer (Spring Boot"
                        + " 3.4+), which tells it when a NESTED step rolls back to its savepoint; this application has"
                        + " Spring Framework " + frameworkVersion + ", whose " + synchronization.getName() + " has no "
                        + callback + "(Object): upgrade Spring Framework (Spring Boot 3.5 brings 6.2)");
            }
        }
    }
}
