package dev.once.spring;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/** once-spring is built on once-core's public API only, so the engine can change without breaking it. */
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
                .dependOnClassesThat()
                .resideInAPackage("dev.once.internal..")
                .because("dev.once.internal is not API; TransactionOutbox is the entry point for a joined outbox")
                .check(SPRING);
    }
}
