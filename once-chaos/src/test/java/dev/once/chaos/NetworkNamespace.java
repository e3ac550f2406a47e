package dev.once.chaos;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A Linux network namespace joined to this one by a veth pair, so a server started inside it
 * ({@link #exec()}) is reached over a real link whose packets the kernel can drop or delay with
 * {@code tc}: a partition (every packet dropped, both ways), {@code netem} loss and delay where the
 * kernel has it, a bandwidth limit. Needs root, {@code ip} and {@code tc} (Debian iproute2).
 */
final class NetworkNamespace implements AutoCloseable {

    private static final AtomicInteger SEQUENCE = new AtomicInteger();

    private final String name;
    private final String outside;
    private final String inside;
    private final String serverAddress;

    private NetworkNamespace(String name, String outside, String inside, String serverAddress) {
        this.name = name;
        this.outside = outside;
        this.inside = inside;
        this.serverAddress = serverAddress;
    }

    /** Why no namespace can be made here, or null when one can. */
    static String unavailable() {
        if (!LocalPostgres.isRoot()) {
            return "not running as root (network namespaces and tc need CAP_NET_ADMIN)";
        }
        for (String tool : List.of("ip", "tc")) {
            try {
                run(List.of(tool, "-V"));
            } catch (IOException | IllegalStateException e) {
                return "no '" + tool + "' command (Debian package iproute2): " + e.getMessage();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "interrupted";
            }
        }
        return null;
    }

    /** A namespace {@code once-PID-N} with the veth pair up, 10.231.N.1 outside and 10.231.N.2 inside. */
    static NetworkNamespace create() throws IOException, InterruptedException {
        removeLeftovers();
        int n = SEQUENCE.incrementAndGet() % 250;
        long pid = ProcessHandle.current().pid();
        String name = "once-" + pid + "-" + n;
        String outside = "onceo" + pid % 10_000 + "x" + n;
        String inside = "oncei" + pid % 10_000 + "x" + n;
        String subnet = "10.231." + n + ".";
        NetworkNamespace ns = new NetworkNamespace(name, outside, inside, subnet + "2");
        run(List.of("ip", "netns", "add", name));
        try {
            run(List.of("ip", "link", "add", outside, "type", "veth", "peer", "name", inside));
            run(List.of("ip", "link", "set", inside, "netns", name));
            run(List.of("ip", "addr", "add", subnet + "1/30", "dev", outside));
            run(List.of("ip", "link", "set", outside, "up"));
            run(ns.inNamespace("ip", "addr", "add", subnet + "2/30", "dev", inside));
            run(ns.inNamespace("ip", "link", "set", inside, "up"));
            run(ns.inNamespace("ip", "link", "set", "lo", "up"));
        } catch (IOException | RuntimeException e) {
            ns.close();
            throw e;
        }
        return ns;
    }

    /**
     * Deletes the namespaces and veth ends of test JVMs that are gone: a run killed before
     * {@link #close()} leaves them (they are kernel objects, not processes), and the next run's
     * namespace of the same number would get the same 10.231.N.0/30 subnet, so its server could not
     * be reached ("Connection to 10.231.1.2 refused").
     */
    private static void removeLeftovers() throws IOException, InterruptedException {
        for (String line : run(List.of("ip", "netns", "list")).split("\\R")) {
            String[] parts = line.strip().split("[ -]");
            // once-PID-N (id: …)
            if (parts.length < 3 || !parts[0].equals("once") || !parts[1].matches("\\d{1,10}")) {
                continue;
            }
            long pid = Long.parseLong(parts[1]);
            if (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                continue;
            }
            tryRun(List.of("ip", "link", "del", "onceo" + pid % 10_000 + "x" + parts[2]));
            tryRun(List.of("ip", "netns", "del", "once-" + pid + "-" + parts[2]));
        }
    }

    /** The address a server inside listens on. */
    String serverAddress() {
        return serverAddress;
    }

    /** The command prefix that runs a program inside the namespace. */
    List<String> exec() {
        return List.of("ip", "netns", "exec", name);
    }

    /** Every packet dropped in both directions (a pfifo of length 0 on each end): TCP only retransmits. */
    void partition() throws IOException, InterruptedException {
        qdisc("pfifo", "limit", "0");
    }

    /** netem on both ends (e.g. {@code loss 10% delay 50ms}); false when the kernel has no netem. */
    boolean netem(String... args) throws IOException, InterruptedException {
        try {
            List<String> a = new ArrayList<>(List.of("netem"));
            a.addAll(List.of(args));
            qdisc(a.toArray(String[]::new));
            return true;
        } catch (IllegalStateException e) {
            if (e.getMessage().contains("unknown")) {
                return false; // "Specified qdisc kind is unknown": sch_netem is not in this kernel
            }
            throw e;
        }
    }

    /** Each direction limited to {@code rate} (e.g. {@code 256kbit}), queueing up to 200 ms before dropping. */
    void throttle(String rate) throws IOException, InterruptedException {
        qdisc("tbf", "rate", rate, "burst", "4kb", "latency", "200ms");
    }

    /** Back to the veth's default: nothing dropped, nothing delayed. */
    void heal() throws IOException, InterruptedException {
        tryRun(List.of("tc", "qdisc", "del", "dev", outside, "root"));
        tryRun(inNamespace("tc", "qdisc", "del", "dev", inside, "root"));
    }

    private void qdisc(String... args) throws IOException, InterruptedException {
        List<String> out = new ArrayList<>(List.of("tc", "qdisc", "replace", "dev", outside, "root"));
        out.addAll(List.of(args));
        run(out);
        run(concat(inNamespace("tc", "qdisc", "replace", "dev", inside, "root"), args));
    }

    private List<String> inNamespace(String... command) {
        return concat(exec(), command);
    }

    private static List<String> concat(List<String> head, String... tail) {
        List<String> all = new ArrayList<>(head);
        all.addAll(List.of(tail));
        return all;
    }

    @Override
    public void close() throws IOException, InterruptedException {
        tryRun(List.of("ip", "link", "del", outside)); // deletes the peer too
        tryRun(List.of("ip", "netns", "del", name));
    }

    private static void tryRun(List<String> command) throws IOException, InterruptedException {
        try {
            run(command);
        } catch (IllegalStateException ignored) {
            // already gone
        }
    }

    private static String run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out;
        try (InputStream in = p.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " failed: " + out.strip());
        }
        return out;
    }
}
