package dev.once.chaos;

import dev.once.testsupport.FreePorts;
import dev.once.testsupport.Services;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A PostgreSQL server of the test's own, started from the machine's binaries
 * ({@code /usr/lib/postgresql/N/bin}, or {@code ONCE_PG_BIN}) or else from the embedded (zonky)
 * ones (which lack pg_basebackup: a standby is then a copy of the stopped primary), in a temporary directory on a free port: what the failover and kernel-fault tests need and
 * the shared server cannot give (a standby, a SIGKILL, a listen address inside a network
 * namespace). As root the servers run as the {@code postgres} OS user, which initdb requires.
 */
final class LocalPostgres implements AutoCloseable {

    /** The service name for {@link Services}: CI lists it, so a missing binary fails there. */
    static final String SERVICE = "postgres-binaries";

    private static Path bin;

    private final Path dataDir;
    private final String host;
    private final int port;
    private final List<String> prefix;

    private LocalPostgres(Path dataDir, String host, int port, List<String> prefix) {
        this.dataDir = dataDir;
        this.host = host;
        this.port = port;
        this.prefix = prefix;
    }

    /**
     * A new primary: initdb, {@code settings} appended to postgresql.conf, started and waited for.
     *
     * @param prefix a command the server runs under, e.g. {@code ip netns exec NS}, or empty
     */
    static LocalPostgres primary(Path root, String name, String host, List<String> prefix, Map<String, String> settings)
            throws IOException, InterruptedException {
        Path data = root.resolve(name);
        run(List.of(), binary("initdb"), "-D", data.toString(), "-U", "postgres", "--auth=trust", "-E", "UTF8");
        StringBuilder conf = new StringBuilder("\n# once chaos test\n");
        conf.append("listen_addresses = '").append(host).append("'\n");
        conf.append("unix_socket_directories = '").append(root).append("'\n");
        conf.append("wal_level = replica\nmax_wal_senders = 4\nfsync = off\nfull_page_writes = off\n");
        conf.append("hot_standby = on\nwal_receiver_status_interval = 1\n");
        settings.forEach((k, v) -> conf.append(k).append(" = '").append(v).append("'\n"));
        Files.writeString(
                data.resolve("postgresql.conf"), conf, StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.APPEND);
        // Replication and client connections from anywhere the test put the server (loopback or a veth).
        Files.writeString(
                data.resolve("pg_hba.conf"),
                "local all all trust\nhost all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 trust\n",
                StandardCharsets.UTF_8);
        chownIfRoot(root);
        LocalPostgres pg = new LocalPostgres(data, host, FreePorts.loopback(), prefix);
        pg.start();
        return pg;
    }

    /**
     * A streaming standby of this server (pg_basebackup -R), named {@code name} for
     * synchronous_standby_names, with {@code conf} appended to its settings before it starts.
     */
    LocalPostgres standby(Path root, String name, String conf) throws IOException, InterruptedException {
        Path data = root.resolve(name);
        if (Files.isExecutable(bin().resolve("pg_basebackup"))) {
            run(
                    prefix,
                    binary("pg_basebackup"),
                    "-h",
                    host,
                    "-p",
                    Integer.toString(port),
                    "-U",
                    "postgres",
                    "-D",
                    data.toString(),
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast");
        } else {
            // The embedded binaries have no pg_basebackup: a copy of the stopped primary is a base
            // backup too; standby.signal and primary_conninfo are what -R would have written.
            run(List.of(), binary("pg_ctl"), "-D", dataDir.toString(), "-m", "fast", "-w", "stop");
            run(List.of(), List.of("cp", "-a", dataDir.toString(), data.toString()));
            Files.deleteIfExists(data.resolve("postmaster.pid"));
            Files.writeString(data.resolve("standby.signal"), "", StandardCharsets.UTF_8);
            Files.writeString(
                    data.resolve("postgresql.auto.conf"),
                    "primary_conninfo = 'host=" + host + " port=" + port + " user=postgres'\n",
                    StandardCharsets.UTF_8,
                    java.nio.file.StandardOpenOption.APPEND);
            start();
        }
        Files.writeString(
                data.resolve("postgresql.auto.conf"),
                "cluster_name = '" + name + "'\nsynchronous_standby_names = ''\n" + conf,
                StandardCharsets.UTF_8,
                java.nio.file.StandardOpenOption.APPEND);
        chownIfRoot(root);
        LocalPostgres standby = new LocalPostgres(data, host, FreePorts.loopback(), prefix);
        standby.start();
        return standby;
    }

    /** Why servers cannot be started here, or null when they can. */
    static String unavailable() {
        try {
            if (isRoot() && new ProcessBuilder("id", "-u", "postgres").start().waitFor() != 0) {
                return "running as root and there is no postgres OS user to run the servers as";
            }
            binary("pg_ctl");
            binary("initdb");
            return null;
        } catch (IOException | RuntimeException e) {
            return e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    /** Skips the calling test (fails it where CI requires the binaries) when no server can be started. */
    static void assumeAvailable() {
        String why = unavailable();
        if (why != null) {
            throw Services.unavailable(
                    SERVICE,
                    "install the PostgreSQL server package (Debian postgresql: /usr/lib/postgresql/N/bin), set ONCE_PG_BIN"
                            + " to a bin directory, or to 'embedded' for the zonky binaries",
                    new IllegalStateException(why));
        }
    }

    String host() {
        return host;
    }

    int port() {
        return port;
    }

    String hostPort() {
        return host + ":" + port;
    }

    String jdbcUrl() {
        return "jdbc:postgresql://" + hostPort() + "/postgres?user=postgres";
    }

    private void start() throws IOException, InterruptedException {
        run(
                prefix,
                binary("pg_ctl"),
                "-D",
                dataDir.toString(),
                "-l",
                dataDir.resolveSibling(dataDir.getFileName() + ".log").toString(),
                "-o",
                "-p " + port,
                "-w",
                "-t",
                "60",
                "start");
    }

    /** {@code pg_ctl promote}: a standby becomes a primary, waited for. */
    void promote() throws IOException, InterruptedException {
        run(List.of(), binary("pg_ctl"), "-D", dataDir.toString(), "-w", "-t", "60", "promote");
    }

    /** The postmaster's process id, from postmaster.pid. */
    long pid() throws IOException {
        return Long.parseLong(
                Files.readAllLines(dataDir.resolve("postmaster.pid")).get(0).strip());
    }

    /** SIGKILL to the postmaster and every backend at once: the machine, as far as clients can tell, died. */
    void kill() throws IOException {
        ProcessHandle postmaster = ProcessHandle.of(pid()).orElse(null);
        if (postmaster == null) {
            return; // killed already: only the pid file is left
        }
        List<ProcessHandle> all = new ArrayList<>(postmaster.descendants().toList());
        all.add(0, postmaster);
        all.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle p : all) {
            p.onExit().orTimeout(10, TimeUnit.SECONDS).exceptionally(e -> p).join();
        }
    }

    @Override
    public void close() throws IOException, InterruptedException {
        if (Files.exists(dataDir.resolve("postmaster.pid"))) {
            try {
                run(List.of(), binary("pg_ctl"), "-D", dataDir.toString(), "-m", "immediate", "-w", "stop");
            } catch (IllegalStateException e) {
                kill(); // a stale pid file after kill(): nothing is running
            }
        }
    }

    /** Deletes a test's server directory tree. */
    static void delete(Path root) throws IOException {
        if (Files.exists(root)) {
            try (Stream<Path> walk = Files.walk(root)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** A temporary directory the postgres OS user may write. */
    static Path tempRoot(String name) throws IOException, InterruptedException {
        Path root = Files.createTempDirectory("once-" + name + "-");
        chownIfRoot(root);
        return root;
    }

    static boolean isRoot() {
        return "root".equals(System.getProperty("user.name"));
    }

    private static void chownIfRoot(Path root) throws IOException, InterruptedException {
        if (isRoot()) {
            run(List.of(), List.of("chown", "-R", "postgres:", root.toString()));
        }
    }

    private static synchronized Path bin() throws IOException {
        if (bin == null) {
            bin = findBin();
        }
        return bin;
    }

    private static String binary(String name) throws IOException {
        Path p = bin().resolve(name);
        if (!Files.isExecutable(p)) {
            throw new IllegalStateException("no " + name + " in " + bin);
        }
        return p.toString();
    }

    private static Path findBin() throws IOException {
        String env = System.getenv("ONCE_PG_BIN");
        if ("embedded".equals(env)) {
            return embedded();
        }
        if (env != null && !env.isBlank()) {
            return Path.of(env);
        }
        Path debian = Path.of("/usr/lib/postgresql");
        if (Files.isDirectory(debian)) {
            try (Stream<Path> versions = Files.list(debian)) {
                var newest = versions.map(v -> v.resolve("bin"))
                        .filter(b -> Files.isExecutable(b.resolve("pg_ctl")))
                        .max(Comparator.comparing(b -> Integer.parseInt(
                                b.getParent().getFileName().toString().replaceAll("\\D", "0"))));
                if (newest.isPresent()) {
                    return newest.get();
                }
            }
        }
        return embedded();
    }

    /** The embedded (zonky) binaries, unpacked from the classpath into a directory the postgres user can read. */
    private static Path embedded() throws IOException {
        String archive = "/postgres-linux-x86_64.txz";
        try (InputStream in = LocalPostgres.class.getResourceAsStream(archive)) {
            if (in == null) {
                throw new IllegalStateException("no PostgreSQL server binaries: none under /usr/lib/postgresql/*/bin,"
                        + " ONCE_PG_BIN unset, and no embedded " + archive + " on the classpath");
            }
            Path dir = tempRoot("pg-bin");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    delete(dir);
                } catch (IOException ignored) {
                    // a temporary directory left behind
                }
            }));
            Path txz = dir.resolve("postgres.txz");
            Files.copy(in, txz);
            run(List.of(), List.of("tar", "-xJf", txz.toString(), "-C", dir.toString()));
            chownIfRoot(dir);
            return dir.resolve("bin");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while unpacking the embedded PostgreSQL", e);
        }
    }

    private static void run(List<String> prefix, String... command) throws IOException, InterruptedException {
        run(prefix, List.of(command));
    }

    /** Runs a command (as the postgres OS user when root, under {@code prefix}), failing with its output. */
    private static void run(List<String> prefix, List<String> command) throws IOException, InterruptedException {
        List<String> full = new ArrayList<>(prefix);
        boolean asPostgres =
                isRoot() && !command.get(0).equals("chown") && !command.get(0).equals("kill");
        if (asPostgres) {
            full.addAll(List.of("runuser", "-u", "postgres", "--"));
        }
        full.addAll(command);
        Process p = new ProcessBuilder(full).redirectErrorStream(true).start();
        String out;
        try (InputStream in = p.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", full) + " failed: " + out.strip());
        }
    }
}
