package dev.once.spring;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/**
 * once-spring is built on once-core's public API only, so the engine can change without breaking it; but for
 * {@code dev.once.internal.fence}, the seam it implements so that {@code Fence.check} on a Spring transaction's
 * connection is checked again at the commit, which once-core exports to it alone.
 */
class SpringArchitectureTest {

    private static final JavaClasses SPRING = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.once.spring");

    @Test
    void usesNoInternalTypeOfCore() {
        noClasses()
                .that()
                .resideInAPackage("dev.once.spring..")
                .should()
                .dependOnClassesThat(JavaClass.Predicates.resideInAPackage("dev.once.internal..")
                        .and(DescribedPredicate.not(JavaClass.Predicates.resideInAPackage("dev.once.internal.fence"))))
                .because("dev.once.internal is not API; TransactionOutbox is the entry point for a joined outbox")
                .check(SPRING);
    }

    @Test
    void onlyTheFenceIntegrationUsesTheFenceSeam() {
        noClasses()
                .that()
                .resideInAPackage("dev.once.spring..")
                .and()
                .doNotHaveFullyQualifiedName(SpringTransactionFences.class.getName())
                .and()
                .doNotHaveFullyQualifiedName(PhysicalTransaction.class.getName())
                .should()
                .dependOnClassesThat()
                .resideInAPackage("dev.once.internal.fence")
                .because("the fence seam is exported to once-spring for its ServiceLoader provider and the"
                        + " transaction state that checks the fences again, nothing else")
                .check(SPRING);
    }
}
