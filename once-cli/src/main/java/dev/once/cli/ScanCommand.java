package dev.once.cli;

import dev.once.cli.internal.ExitCodes;
import dev.once.cli.internal.Failure;
import dev.once.scan.ConsumerScan;
import dev.once.scan.Format;
import dev.once.scan.Level;
import dev.once.scan.ScanReport;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code once scan}: finds the consumers in a Java codebase that would not survive a duplicate delivery. */
@Command(
        name = "scan",
        mixinStandardHelpOptions = true,
        description = {
            "Find message consumers that would not survive a duplicate delivery.",
            "%nReads the Java sources, Spring configuration and schema under PATH: entry points (listeners, poll loops,"
                    + " Lambda handlers), where each acknowledges relative to its effects, the effects it reaches, the dedupe"
                    + " it has, lease risks; ranks the consumers by blast radius and prints the Production Reliability Index."
                    + " The summary line SCAN files=… lines=… entry_points=… findings=… seconds=… goes to standard error.%n"
        })
final class ScanCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", paramLabel = "PATH", description = "the repository (or a directory in it) to scan")
    Path path;

    @Option(
            names = "--format",
            defaultValue = "text",
            paramLabel = "text|json|sarif|markdown",
            description = "output format (default: ${DEFAULT-VALUE})")
    String format;

    @Option(
            names = "--base",
            paramLabel = "GIT_REF",
            description =
                    "pull-request mode: report only consumers changed since this ref, each finding marked new or existing")
    String base;

    @Option(
            names = "--fail-on",
            paramLabel = "error|warning|note",
            description = "exit " + ExitCodes.FINDINGS + " when a finding is at least this serious (default: never)")
    String failOn;

    @Option(
            names = "--output",
            paramLabel = "FILE",
            description = "write the report to FILE instead of standard output")
    Path output;

    @Override
    public Integer call() {
        Format f;
        Level threshold;
        ConsumerScan scan;
        try {
            f = Format.parse(format);
            threshold = failOn == null ? null : Level.parse(failOn);
            scan = ConsumerScan.builder().root(path).base(base).build();
        } catch (IllegalArgumentException e) {
            throw Failure.usage(e.getMessage());
        }
        ScanReport report;
        try {
            report = scan.run();
        } catch (IllegalStateException e) {
            throw Failure.failed(e.getMessage(), e);
        }
        String rendered = f.render(report);
        if (output != null) {
            try {
                Path parent = output.toAbsolutePath().getParent();
                if (parent != null) {
                    Files.createDirectories(parent);
                }
                Files.writeString(output, rendered, StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw Failure.failed("cannot write " + output + ": " + e.getMessage(), e);
            }
        } else {
            spec.commandLine().getOut().print(rendered);
            spec.commandLine().getOut().flush();
        }
        spec.commandLine().getErr().println(report.summaryLine());
        return threshold != null && report.hasFindingsAtLeast(threshold) ? ExitCodes.FINDINGS : ExitCodes.OK;
    }
}
