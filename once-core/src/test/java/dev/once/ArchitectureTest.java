package dev.once;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaField;
import com.tngtech.archunit.core.domain.JavaMember;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.domain.JavaType;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import dev.once.tx.TransactionHandle;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.nio.file.Path;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The layers of once-core, checked on its compiled classes: {@code dev.once} and the other API
 * packages on top, {@code dev.once.internal} (the engine) underneath and never exposed, the
 * transaction seam the only place that ends a transaction, and no broker client or JDBC driver.
 */
class ArchitectureTest {

    // once-core's own classes only: the test class path also holds once-test-support, whose
    // dev.once.testkit classes use drivers and pools as a test library should.
    private static final JavaClasses CORE = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importUrl(Schema.class.getProtectionDomain().getCodeSource().getLocation());

    @Test
    void apiPackagesExposeNoInternalType() {
        classes()
                .that()
                .resideOutsideOfPackage("dev.once.internal..")
                .and()
                .arePublic()
                .should(exposeNoInternalType())
                .check(CORE);
    }

    /**
     * The engine is reachable from no other module, but for the one seam a transaction integration
     * implements ({@code dev.once.internal.fence}: what {@code Fence.check} tells once-spring, and the fence it
     * checks again), exported to {@code dev.once.spring} alone; and what once-core loads with {@code
     * ServiceLoader} is that seam, never an API type (an SPI in an API package is API every user sees and
     * every change breaks). With {@link #apiPackagesExposeNoInternalType} no API signature leads to it.
     */
    @Test
    void theModuleExportsNoInternalPackageButTheFenceSeamToOnceSpring() throws Exception {
        ModuleDescriptor core = ModuleFinder.of(Path.of(Schema.class
                        .getProtectionDomain()
                        .getCodeSource()
                        .getLocation()
                        .toURI()))
                .find("dev.once.core")
                .orElseThrow(() -> new AssertionError("no module-info for dev.once.core in once-core's classes"))
                .descriptor();
        List<String> wrong = new ArrayList<>();
        for (ModuleDescriptor.Exports e : core.exports()) {
            boolean internal = e.source().startsWith("dev.once.internal");
            if (internal
                    && !(e.source().equals("dev.once.internal.fence")
                            && e.targets().equals(Set.of("dev.once.spring")))) {
                wrong.add("exports " + e);
            }
        }
        for (String service : core.uses()) {
            if (!service.startsWith("dev.once.internal.fence.")) {
                wrong.add("uses " + service + ", a service outside the internal seam dev.once.internal.fence");
            }
        }
        if (!wrong.isEmpty()) {
            throw new AssertionError("once-core's module descriptor: " + wrong);
        }
    }

    @Test
    void packagesHaveNoCycles() {
        // dev.once.jdbc is the dialect half of the core API (Inbox takes a Dialect, Dialects throws the
        // API's InvalidConfigurationException): one slice. The engine in dev.once.internal serves
        // every API package and is never exposed by one (see above), so it is left out of the slices.
        slices().assignedFrom(new SliceAssignment() {
                    @Override
                    public SliceIdentifier getIdentifierOf(JavaClass c) {
                        String p = c.getPackageName();
                        if (p.startsWith("dev.once.internal")) {
                            return SliceIdentifier.ignore();
                        }
                        if (p.equals("dev.once") || p.startsWith("dev.once.jdbc")) {
                            return SliceIdentifier.of("dev.once + dev.once.jdbc");
                        }
                        return SliceIdentifier.of(p);
                    }

                    @Override
                    public String getDescription() {
                        return "the API packages of once-core";
                    }
                })
                .should()
                .beFreeOfCycles()
                .check(CORE);
    }

    /**
     * The transaction SPI is what an integration (Spring, JTA) implements and the engine uses: it must
     * not know the engine, or the two import each other (the owned provider once lived in
     * {@code internal.Transactions} behind {@code TransactionProvider.owning}).
     */
    @Test
    void theTransactionSpiDoesNotKnowTheEngine() {
        noClasses()
                .that()
                .resideInAPackage("dev.once.tx..")
                .should()
                .dependOnClassesThat()
                .resideInAPackage("dev.once.internal..")
                .check(CORE);
    }

    @Test
    void theApiPackageDoesNotDependOnTheOutboxRelaySide() {
        noClasses()
                .that()
                .resideInAPackage("dev.once")
                .should()
                .dependOnClassesThat()
                .resideInAPackage("dev.once.outbox..")
                .check(CORE);
    }

    @Test
    void coreImportsNoBrokerClientAndNoDriver() {
        noClasses()
                .that()
                .resideInAPackage("dev.once..")
                .should()
                .dependOnClassesThat()
                .resideInAnyPackage(
                        "org.apache.kafka..",
                        "software.amazon..",
                        "com.rabbitmq..",
                        "io.nats..",
                        "org.postgresql..",
                        "org.mariadb..",
                        "com.mysql..",
                        "com.zaxxer..",
                        "org.springframework..")
                .check(CORE);
    }

    /**
     * Only the transaction seam begins, commits and rolls back, on a connection or on a
     * {@link TransactionHandle}: {@code internal.Transactions} decides commit or rollback, and
     * {@code dev.once.tx} is its public side (the owned handle {@code OwnedTransaction} switches
     * auto-commit and ends the connection's transaction; {@code ManualTransactions.Scope} commits the
     * caller's hand-managed transaction for the caller).
     * Not on the list because it needs no transaction: {@code internal.PgListener}, whose LISTEN
     * connection is an auto-commit session (one that arrives with auto-commit off is refused, never
     * switched).
     */
    @Test
    void onlyTheTransactionSeamEndsTransactions() {
        DescribedPredicate<JavaClass> seam = DescribedPredicate.describe(
                "the transaction seam",
                c -> c.getPackageName().equals("dev.once.tx")
                        || c.getName().equals("dev.once.internal.Transactions")
                        || c.getName().startsWith("dev.once.internal.Transactions$"));
        noClasses()
                .that(DescribedPredicate.not(seam))
                .should()
                .callMethod(Connection.class, "commit")
                .orShould()
                .callMethod(Connection.class, "rollback")
                .orShould()
                .callMethod(Connection.class, "setAutoCommit", boolean.class)
                .orShould()
                .callMethod(TransactionHandle.class, "commit")
                .orShould()
                .callMethod(TransactionHandle.class, "rollback")
                .because(
                        "the transaction seam (internal.Transactions, dev.once.tx) is the one place that begins, commits and rolls back")
                .check(CORE);
    }

    private static ArchCondition<JavaClass> exposeNoInternalType() {
        return new ArchCondition<>("expose no dev.once.internal type in a public or protected signature") {
            @Override
            public void check(JavaClass c, ConditionEvents events) {
                List<String> found = new ArrayList<>();
                if (c.getRawSuperclass().map(ArchitectureTest::internal).orElse(false)) {
                    found.add("extends " + c.getRawSuperclass().get().getName());
                }
                for (JavaClass i : c.getRawInterfaces()) {
                    if (internal(i)) {
                        found.add("implements " + i.getName());
                    }
                }
                for (JavaMember m : c.getMembers()) {
                    if (!m.getModifiers().contains(JavaModifier.PUBLIC)
                            && !m.getModifiers().contains(JavaModifier.PROTECTED)) {
                        continue;
                    }
                    List<JavaType> types = new ArrayList<>();
                    if (m instanceof JavaField f) {
                        types.add(f.getType());
                    } else if (m instanceof JavaCodeUnit u) {
                        types.add(u.getReturnType());
                        types.addAll(u.getParameterTypes());
                    }
                    for (JavaType t : types) {
                        for (JavaClass raw : t.getAllInvolvedRawTypes()) {
                            if (internal(raw)) {
                                found.add(m.getFullName() + " uses " + raw.getName());
                            }
                        }
                    }
                }
                for (String f : found) {
                    events.add(SimpleConditionEvent.violated(c, c.getName() + ": " + f));
                }
            }
        };
    }

    private static boolean internal(JavaClass c) {
        return c.getPackageName().startsWith("dev.once.internal");
    }
}
