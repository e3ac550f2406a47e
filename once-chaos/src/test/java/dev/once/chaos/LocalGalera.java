package dev.once.chaos;

import dev.once.testsupport.FreePorts;
import dev.once.testsupport.Services;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A three-node (or n-node) MariaDB Galera cluster of the test's own, from Debian's {@code mariadb-server}
 * and {@code galera-4}: one data directory and port set per node in a temporary directory, all on
 * loopback, the first node bootstrapping the cluster ({@code --wsrep-new-cluster}), the others
 * joining by rsync state transfer. Never the machine's MariaDB on 3306. As root the servers run as
 * the {@code mysql} OS user.
 */
final class LocalGalera implements AutoCloseable {

    /** The service name for {@link Services}: CI lists it, so missing packages fail there. */
    static final String SERVICE = "galera";

    private static final Path SERVER = Path.of("/usr/sbin/mariadbd");
    private static final Path INSTALL_DB = Path.of("/usr/bin/mariadb-install-db");
    private static final List<Path> PROVIDERS =
            List.of(Path.of("/usr/lib/galera/libgalera_smm.so"), Path.of("/usr/lib/libgalera_smm.so"));

    private final Path root;
    private final List<Node> nodes = new ArrayList<>();

    /** One server: its ports and, while it runs, its process. */
    static final class Node {
        final String name;
        final int port;
        final int galeraPort;
        final int sstPort;
        final int istPort;
        Process process;

        private Node(String name) throws IOException {
            this.name = name;
            this.port = FreePorts.loopback();
            this.galeraPort = FreePorts.loopback();
            this.sstPort = FreePorts.loopback();
            this.istPort = FreePorts.loopback();
        }

        String jdbcUrl(String database) {
            return "jdbc:mariadb://127.0.0.1:" + port + "/" + database + "?user=root";
        }

        int port() {
            return port;
        }

        /** False once {@link LocalGalera#kill} took the node down. */
        boolean alive() {
            return process != null && process.isAlive();
        }
    }

    private LocalGalera(Path root) {
        this.root = root;
    }

    /** Why a cluster cannot be started here, or null when it can. */
    static String unavailable() {
        if (!Files.isExecutable(SERVER) || !Files.isExecutable(INSTALL_DB)) {
            return "no MariaDB server (" + SERVER + ", " + INSTALL_DB + "): apt-get install mariadb-server";
        }
        if (provider() == null) {
            return "no Galera provider (" + PROVIDERS + "): apt-get install galera-4";
        }
        if (!Files.isExecutable(Path.of("/usr/bin/rsync"))) {
            return "no rsync for the joiners' state transfer: apt-get install rsync";
        }
        try {
            if (LocalPostgres.isRoot()
                    && new ProcessBuilder("id", "-u", "mysql").start().waitFor() != 0) {
                return "running as root and there is no mysql OS user to run the servers as";
            }
        } catch (IOException e) {
            return e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
        return null;
    }

    /** Skips the calling test (fails it where CI requires Galera) when no cluster can be started. */
    static void assumeAvailable() {
        String why = unavailable();
        if (why != null) {
            throw Services.unavailable(
                    SERVICE,
                    "install Debian's galera-4 and mariadb-server (the CI script does)",
                    new IllegalStateException(why));
        }
    }

    private static Path provider() {
        return PROVIDERS.stream().filter(Files::isReadable).findFirst().orElse(null);
    }

    /** Starts {@code size} nodes and waits until every one is synced in one cluster of that size. */
    static LocalGalera start(int size) throws IOException, InterruptedException {
        LocalGalera g = new LocalGalera(Files.createTempDirectory("once-galera-"));
        try {
            for (int i = 1; i <= size; i++) {
                g.nodes.add(new Node("n" + i));
            }
            for (Node n : g.nodes) {
                g.configure(n);
            }
            // One mariadb-install-db (seconds of CPU each) and copies of its data directory: the system
            // tables are the same on every node, and the joiners' state transfer replaces theirs anyway.
            Path first = g.installDb(g.nodes.get(0));
            for (Node n : g.nodes.subList(1, size)) {
                copyTree(first, g.root.resolve(n.name));
            }
            g.chownIfRoot();
            g.launch(g.nodes.get(0), true);
            g.awaitSynced(g.nodes.get(0), 1);
            // Joiners one at a time: two joining at once both ask the one donor for a state transfer, and
            // one was seen to fall out of the primary component and exit (a CI run of 2026-12-03, node n3).
            for (int i = 1; i < size; i++) {
                g.launch(g.nodes.get(i), false);
                g.awaitSynced(g.nodes.get(i), i + 1);
            }
            for (Node n : g.nodes) {
                g.awaitSynced(n, size);
            }
            return g;
        } catch (IOException | InterruptedException | RuntimeException e) {
            g.close();
            throw e;
        }
    }

    List<Node> nodes() {
        return nodes;
    }

    Node node(int index) {
        return nodes.get(index);
    }

    private void configure(Node n) throws IOException {
        Path data = root.resolve(n.name);
        StringBuilder addresses = new StringBuilder();
        for (Node other : nodes) {
            addresses
                    .append(addresses.length() == 0 ? "" : ",")
                    .append("127.0.0.1:")
                    .append(other.galeraPort);
        }
        String conf = "[mariadbd]\n"
                + "datadir=" + data + "\n"
                + "socket=" + root.resolve(n.name + ".sock") + "\n"
                + "pid-file=" + root.resolve(n.name + ".pid") + "\n"
                + "port=" + n.port + "\n"
                + "bind-address=127.0.0.1\n"
                + "log-error=" + root.resolve(n.name + ".err") + "\n"
                + "skip-name-resolve\n"
                + "max_connections=300\n"
                + "binlog_format=ROW\n"
                + "default_storage_engine=InnoDB\n"
                + "innodb_autoinc_lock_mode=2\n"
                + "innodb_flush_log_at_trx_commit=0\n"
                + "innodb_buffer_pool_size=64M\n"
                + "wsrep_on=ON\n"
                + "wsrep_provider=" + provider() + "\n"
                + "wsrep_cluster_name=once-chaos\n"
                + "wsrep_cluster_address=gcomm://" + addresses + "\n"
                + "wsrep_node_address=127.0.0.1:" + n.galeraPort + "\n"
                + "wsrep_node_name=" + n.name + "\n"
                + "wsrep_provider_options=gmcast.listen_addr=tcp://127.0.0.1:" + n.galeraPort
                + ";ist.recv_addr=127.0.0.1:" + n.istPort + ";gcache.size=32M\n"
                + "wsrep_sst_method=rsync\n"
                + "wsrep_sst_receive_address=127.0.0.1:" + n.sstPort + "\n";
        Files.writeString(root.resolve(n.name + ".cnf"), conf, StandardCharsets.UTF_8);
    }

    /** Creates the node's data directory with mariadb-install-db and returns it. */
    private Path installDb(Node n) throws IOException, InterruptedException {
        Path data = root.resolve(n.name);
        Files.createDirectories(data);
        chownIfRoot();
        run(List.of(
                INSTALL_DB.toString(),
                "--no-defaults",
                "--datadir=" + data,
                "--auth-root-authentication-method=normal",
                "--skip-test-db"));
        return data;
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path p : (Iterable<Path>) paths::iterator) {
                Files.copy(p, to.resolve(from.relativize(p).toString()), StandardCopyOption.COPY_ATTRIBUTES);
            }
        }
    }

    private void launch(Node n, boolean bootstrap) throws IOException {
        List<String> command = new ArrayList<>(asServerUser());
        command.add(SERVER.toString());
        command.add("--defaults-file=" + root.resolve(n.name + ".cnf"));
        if (bootstrap) {
            command.add("--wsrep-new-cluster");
        }
        n.process = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(root.resolve(n.name + ".out").toFile())
                .start();
    }

    private void awaitSynced(Node n, int size) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofMinutes(3).toNanos();
        String last = "not reached";
        while (System.nanoTime() < deadline) {
            for (Node other : nodes) {
                if (other.process != null && !other.process.isAlive()) {
                    throw new IllegalStateException("galera node " + other.name + " exited: " + log(other));
                }
            }
            try (Connection c = DriverManager.getConnection(n.jdbcUrl("mysql"));
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT (SELECT variable_value FROM information_schema.global_status"
                            + " WHERE variable_name = 'wsrep_local_state_comment'),"
                            + " (SELECT variable_value FROM information_schema.global_status"
                            + " WHERE variable_name = 'wsrep_cluster_size')")) {
                rs.next();
                last = rs.getString(1) + " in a cluster of " + rs.getString(2);
                if ("Synced".equals(rs.getString(1)) && Integer.parseInt(rs.getString(2)) == size) {
                    return;
                }
            } catch (SQLException e) {
                last = e.getMessage();
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("galera node " + n.name + " not synced in a cluster of " + size + ": " + last
                + "; "
                + String.join(
                        "; ", nodes.stream().map(o -> o.name + ": " + log(o)).toList()));
    }

    /** SIGKILL to the node's server: the machine, as far as the others can tell, died. */
    void kill(Node n) throws IOException, InterruptedException {
        Path pidFile = root.resolve(n.name + ".pid");
        if (Files.exists(pidFile)) {
            long pid = Long.parseLong(Files.readString(pidFile).strip());
            ProcessHandle.of(pid).ifPresent(p -> {
                p.destroyForcibly();
                p.onExit().orTimeout(30, TimeUnit.SECONDS).exceptionally(e -> p).join();
            });
        }
        if (n.process != null) {
            n.process.destroyForcibly();
            n.process.waitFor(30, TimeUnit.SECONDS);
        }
    }

    private String log(Node n) {
        try {
            List<String> lines = Files.readAllLines(root.resolve(n.name + ".err"));
            return "last lines of its log:\n"
                    + String.join("\n", lines.subList(Math.max(0, lines.size() - 15), lines.size()));
        } catch (IOException e) {
            return "no log (" + e.getMessage() + ")";
        }
    }

    @Override
    public void close() throws IOException, InterruptedException {
        for (Node n : nodes) {
            kill(n);
        }
        LocalPostgres.delete(root);
    }

    private static List<String> asServerUser() {
        return LocalPostgres.isRoot() ? List.of("runuser", "-u", "mysql", "--") : List.of();
    }

    private void chownIfRoot() throws IOException, InterruptedException {
        if (LocalPostgres.isRoot()) {
            Process p = new ProcessBuilder("chown", "-R", "mysql:", root.toString())
                    .redirectErrorStream(true)
                    .start();
            p.getInputStream().readAllBytes();
            p.waitFor();
        }
    }

    private static void run(List<String> command) throws IOException, InterruptedException {
        List<String> full = new ArrayList<>(asServerUser());
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
