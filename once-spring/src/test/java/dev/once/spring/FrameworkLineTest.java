package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import org.junit.jupiter.api.Test;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.transaction.support.TransactionSynchronization;

/**
 * Spring Framework 6.1's {@code TransactionSynchronization} has no savepoint callbacks: once would not
 * hear of a NESTED step's rollback and would send what it undid. Such a Framework is refused.
 */
class FrameworkLineTest {

    /** The shape of Spring Framework 6.1's TransactionSynchronization: no savepoint callbacks. */
    interface Framework61Synchronization {
        default void suspend() {}

        default void beforeCommit(boolean readOnly) {}

        default void afterCompletion(int status) {}
    }

    @Test
    void aFrameworkWithoutSavepointCallbacksIsRefusedNamingTheUpgrade() {
        assertThatThrownBy(() -> FrameworkLine.requireSavepointCallbacks(Framework61Synchronization.class, "6.1.21"))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("Spring Framework 6.2 or newer")
                .hasMessageContaining("6.1.21")
                .hasMessageContaining("savepoint(Object)");
    }

    @Test
    void theFrameworkOnTheClassPathHasThem() {
        assertThatCode(() -> FrameworkLine.requireSavepointCallbacks(TransactionSynchronization.class, "this"))
                .doesNotThrowAnyException();
        assertThat(SpringTransactionProvider.of(new DriverManagerDataSource())).isNotNull();
    }
}
