package dev.once.cli;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.Durations;
import dev.once.cli.internal.Failure;
import dev.once.jdbc.TablePrefix;
import dev.once.retention.InboxPruner;
import dev.once.retention.StreamPositionPruner;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.Callable;
import java.util.function.LongSupplier;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code once prune}: deletes inbox rows older than the retention, with {@link InboxPruner}, then the positions of
 * streams that did not move within theirs, with {@link StreamPositionPruner}.
 */
@Command(
        name = "prune",
        mixinStandardHelpOptions = true,
        description = {
            "Delete inbox rows older than the retention, and the positions of streams (SQS FIFO message groups) that"
                    + " did not move within the stream retention.",
            "%nDeletes in short chunks, one transaction each. The retention must cover the redelivery horizon: a copy"
                    + " of an event arriving after its row was pruned would apply twice. A stream whose position was"
                    + " pruned starts afresh: a message behind that position would apply after its successors.%n"
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
            names = "--stream-retention",
            converter = Durations.class,
            defaultValue = "15d",
            description = "keep the position of a stream (an SQS FIFO message group) this long after it last moved"
                    + " (default: ${DEFAULT-VALUE}: SQS's longest message retention and visibility timeout)")
    Duration streamRetention;

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
        StreamPositionPruner.Builder streams;
        try {
            builder = InboxPruner.builder()
                    .tablePrefix(p)
                    .retention(retention)
                    .redeliveryHorizon(horizon)
                    .chunkSize(chunkSize);
            streams = StreamPositionPruner.builder()
                    .tablePrefix(p)
                    .retention(streamRetention)
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
            StreamPositionPruner streamPruner = streams.dataSource(ds).build();
            Instant now = Instant.now();
            long deleted = prune(pruner::prune);
            spec.commandLine()
                    .getOut()
                    .println("pruned " + deleted + " inbox row" + (deleted == 1 ? "" : "s") + " processed before "
                            + now.minus(retention) + " (retention " + Durations.format(retention) + ")");
            long streamsDeleted = prune(streamPruner::prune);
            spec.commandLine()
                    .getOut()
                    .println("pruned " + streamsDeleted + " stream position" + (streamsDeleted == 1 ? "" : "s")
                            + " last moved before " + now.minus(streamRetention) + " (retention "
                            + Durations.format(streamRetention) + ")");
            return 0;
        }
    }

    private static long prune(LongSupplier pruner) {
        try {
            return pruner.getAsLong();
        } catch (OnceException e) {
            throw Failure.failed(e.getMessage(), e);
        }
    }
}
