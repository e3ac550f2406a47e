package dev.once.cli;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.Durations;
import dev.once.cli.internal.Failure;
import dev.once.jdbc.TablePrefix;
import dev.once.retention.InboxPruner;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code once prune}: deletes inbox rows older than the retention, with {@link InboxPruner}. */
@Command(
        name = "prune",
        mixinStandardHelpOptions = true,
        description = {
            "Delete inbox rows older than the retention.",
            "%nDeletes in short chunks, one transaction each. The retention must cover the redelivery horizon: a copy"
                    + " of an event arriving after its row was pruned would apply twice.%n"
        })
final class PruneCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--url", required = true, description = Databases.EXPECTED_URL)
    String url;

    @Option(
            names = "--retention",
            required = true,
            converter = Durations.class,
            description = "keep rows this long: " + Durations.EXPECTED)
    Duration retention;

    @Option(
            names = "--redelivery-horizon",
            converter = Durations.class,
            defaultValue = "7d",
            description =
                    "the longest time after which a copy of an event can still arrive (default: ${DEFAULT-VALUE}); "
                            + "a retention shorter than this is refused")
    Duration horizon;

    @Option(
            names = "--prefix",
            defaultValue = TablePrefix.DEFAULT,
            description = "table name prefix (default: ${DEFAULT-VALUE})")
    String prefix;

    @Option(
            names = "--chunk-size",
            defaultValue = "" + InboxPruner.DEFAULT_CHUNK_SIZE,
            description = "rows deleted per transaction (default: ${DEFAULT-VALUE})")
    int chunkSize;

    @Override
    public Integer call() {
        String p = SchemaCommand.prefix(prefix);
        InboxPruner.Builder builder;
        try {
            builder = InboxPruner.builder()
                    .tablePrefix(p)
                    .retention(retention)
                    .redeliveryHorizon(horizon)
                    .chunkSize(chunkSize);
        } catch (InvalidConfigurationException e) {
            throw Failure.usage(e.getMessage());
        }
        try (HikariDataSource ds = Databases.open(url, 1)) {
            InboxPruner pruner;
            try {
                pruner = builder.dataSource(ds).build();
            } catch (InvalidConfigurationException e) {
                throw Failure.usage(e.getMessage() + " (pass --redelivery-horizon to state a shorter one)");
            }
            Instant cutoff = Instant.now().minus(retention);
            long deleted;
            try {
                deleted = pruner.prune();
            } catch (OnceException e) {
                throw Failure.failed(e.getMessage(), e);
            }
            spec.commandLine()
                    .getOut()
                    .println("pruned " + deleted + " inbox row" + (deleted == 1 ? "" : "s") + " processed before "
                            + cutoff + " (retention " + Durations.format(retention) + ")");
            return 0;
        }
    }
}
