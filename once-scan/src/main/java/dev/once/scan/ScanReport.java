package dev.once.scan;

import java.util.List;

/**
 * The result of a scan.
 *
 * @param root        the scanned directory
 * @param files       Java files parsed
 * @param lines       lines in them
 * @param consumers   entry points, riskiest first
 * @param findings    findings, riskiest consumer first
 * @param index       the Production Reliability Index, 0–100 (see {@link Scoring})
 * @param seconds     wall time of the scan
 * @param base        the git ref of pull-request mode, null for a full scan
 * @param suppressed  findings left out by {@code @SuppressWarnings("once-scan")}
 * @param unresolved  call sites whose types the symbol solver could not resolve (scanned by name instead)
 */
public record ScanReport(
        String root,
        int files,
        long lines,
        List<Consumer> consumers,
        List<Finding> findings,
        int index,
        double seconds,
        String base,
        int suppressed,
        int unresolved) {

    public ScanReport {
        consumers = List.copyOf(consumers);
        findings = List.copyOf(findings);
    }

    /** The one-line summary the command prints. */
    public String summaryLine() {
        return String.format(
                java.util.Locale.ROOT,
                "SCAN files=%d lines=%d entry_points=%d findings=%d seconds=%.2f",
                files,
                lines,
                consumers.size(),
                findings.size(),
                seconds);
    }

    /** True if some finding is at least as serious as {@code threshold}. */
    public boolean hasFindingsAtLeast(Level threshold) {
        return findings.stream().anyMatch(f -> f.level().atLeast(threshold));
    }
}
