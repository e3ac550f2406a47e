package dev.once.cli;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The rules that need every module, checked on their compiled classes: no adapter depends on
 * another, none reaches into another module's {@code internal} package (core's engine included),
 * and no builder reports bad configuration as anything but {@code InvalidConfigurationException}.
 * Here because once-cli is the module whose test classpath can see every adapter (once-core's
 * {@code ArchitectureTest} checks the core's own layers).
 */
class ModulesArchitectureTest {

    /** The adapter modules by their root package. */
    private static final List<String> ADAPTERS =
            List.of("kafka", "sqs", "rabbitmq", "nats", "pubsub", "spring", "http");

    /**
     * Internal packages another module may use, and which: once-core's module-info exports {@code
     * dev.once.internal.fence} to {@code dev.once.spring} alone (its {@code ArchitectureTest} checks the
     * descriptor says so), the seam {@code Fence.check} tells once-spring's transactions through.
     */
    private static final Map<String, String> EXPORTED_TO = Map.of("dev.once.internal.fence", "spring");

    /** Core, the adapters and the test kit: the library, without the command and the scanner. */
    private static final JavaClasses LIBRARY = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.once");

    /** The adapters' classes, picked from {@link #LIBRARY} (one import of the class path, not two). */
    private static final JavaClasses ADAPTER_CLASSES = LIBRARY.that(JavaClass.Predicates.resideInAnyPackage(
            ADAPTERS.stream().map(a -> "dev.once." + a + "..").toArray(String[]::new)));

    @Test
    void everyAdapterIsOnTheClasspath() {
        for (String a : ADAPTERS) {
            if (ADAPTER_CLASSES.stream()
                    .noneMatch(c -> module(c.getPackageName()).equals(a))) {
                throw new AssertionError(
                        "no classes of dev.once." + a + " found: is once-" + a + " a test dependency of once-cli?");
            }
        }
    }

    @Test
    void adaptersDoNotDependOnEachOther() {
        slices().assignedFrom(new SliceAssignment() {
                    @Override
                    public SliceIdentifier getIdentifierOf(JavaClass c) {
                        String m = module(c.getPackageName());
                        return ADAPTERS.contains(m) ? SliceIdentifier.of("once-" + m) : SliceIdentifier.ignore();
                    }

                    @Override
                    public String getDescription() {
                        return "the adapter modules";
                    }
                })
                .should()
                .notDependOnEachOther()
                .because("an adapter uses only core; glue between two (the Spring Boot starter) lives apart")
                .check(ADAPTER_CLASSES);
    }

    @Test
    void adaptersUseNoOtherModulesInternals() {
        classes()
                .should(new ArchCondition<>("depend on no other module's internal package") {
                    @Override
                    public void check(JavaClass c, ConditionEvents events) {
                        String own = module(c.getPackageName());
                        for (Dependency d : c.getDirectDependenciesFromSelf()) {
                            JavaClass target = d.getTargetClass();
                            String p = target.getPackageName();
                            boolean internal =
                                    p.startsWith("dev.once.") && (p.endsWith(".internal") || p.contains(".internal."));
                            if (!internal || module(p).equals(own) || own.equals(EXPORTED_TO.get(p))) {
                                continue;
                            }
                            events.add(SimpleConditionEvent.violated(d, d.getDescription()));
                        }
                    }
                })
                .because("internal packages are not API: another module goes through the API, or the"
                        + " API grows what it needs")
                .check(ADAPTER_CLASSES);
    }

    @Test
    void buildersReportBadConfigurationAsInvalidConfigurationException() {
        noClasses()
                .that()
                .haveSimpleNameEndingWith("Builder")
                // The scanner has no once-core dependency (it runs on other people's code, alone), and
                // the command's and benchmark's argument errors are usage errors, not a library's.
                .and()
                .resideOutsideOfPackages("dev.once.scan..", "dev.once.cli..", "dev.once.bench..")
                .should()
                .callConstructorWhere(DescribedPredicate.describe(
                        "an IllegalArgumentException or IllegalStateException",
                        call -> call.getTargetOwner().isAssignableTo(IllegalArgumentException.class)
                                || call.getTargetOwner().isAssignableTo(IllegalStateException.class)))
                .because("a configuration error is an InvalidConfigurationException naming the value and what is"
                        + " expected")
                .check(LIBRARY);
    }

    /** The once module a package belongs to ({@code dev.once.kafka.internal}: kafka, {@code dev.once.internal}: core), or "" outside once. */
    private static String module(String pkg) {
        if (!pkg.startsWith("dev.once.")) {
            return pkg.equals("dev.once") ? "core" : "";
        }
        if (pkg.startsWith("dev.once.spring.boot")) {
            return "spring-boot-starter";
        }
        String[] parts = pkg.split("\\.");
        if (parts.length < 3 || parts[2].equals("internal")) {
            return "core";
        }
        return parts[2];
    }
}
