package dev.once.testkit.broker;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.IdempotentConsumer;
import java.lang.reflect.Constructor;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;

/**
 * The child JVM of {@link BrokerContract}'s crash case. It builds the adapter's consumer through
 * the contract subclass named on the command line, on a data source whose {@code commit()}
 * prints {@value #COMMITTED} once the commit has returned and then never returns to the caller.
 * The adapter therefore never gets to acknowledge: the parent SIGKILLs this JVM in exactly the
 * gap between the database commit and the broker ack.
 *
 * <p>Arguments: contract class name, JDBC URL (already pointing at the case's schema), destination.
 */
public final class AckGapChild {

    /** Printed once the consumer is running. */
    public static final String STARTED = "ONCE-CHILD STARTED";
    /** Printed right after the first commit returned, before anything can be acknowledged. */
    public static final String COMMITTED = "ONCE-CHILD COMMITTED";

    private AckGapChild() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            throw new IllegalArgumentException(
                    "expected: <contract class> <jdbc url> <destination>, but got " + args.length + " arguments");
        }
        Constructor<?> constructor = Class.forName(args[0]).getDeclaredConstructor();
        constructor.setAccessible(true);
        BrokerContract contract = (BrokerContract) constructor.newInstance();

        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(args[1]);
        config.setMaximumPoolSize(4);
        DataSource dataSource = stopAfterCommit(new HikariDataSource(config));
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(dataSource)
                .consumer(BrokerContract.CONSUMER)
                .handler(new LedgerHandler())
                .build();
        contract.startConsumer(args[2], consumer, 1);
        System.out.println(STARTED);
        System.out.flush();
        while (true) {
            LockSupport.park(); // the parent kills this JVM; nothing here ever acknowledges
        }
    }

    private static DataSource stopAfterCommit(DataSource target) {
        return Proxies.afterCommit(target, () -> {
            System.out.println(COMMITTED);
            System.out.flush();
            while (true) {
                LockSupport.park(); // the commit returned; the ack must never happen
            }
        });
    }
}
