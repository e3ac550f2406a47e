package dev.once.chaos;

import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.FreePorts;
import dev.once.testsupport.Services;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * PostgreSQL HA as operators run it: one etcd member and two or more Patroni members from Debian's
 * {@code etcd-server} and {@code patroni} packages, with the machine's PostgreSQL binaries, in a
 * temporary directory on loopback ports (never the machine's cluster on 5432). Each member
 * advertises a {@link FaultProxy} in front of its server as its {@code connect_address}, so the
 * replicas' streaming connection to the leader goes through it and a test can partition
 * replication; clients connect to the servers directly. As root everything runs as the
 * {@code postgres} OS user.
 */
final class LocalPatroni implements AutoCloseable {

    /** The service name for {@link Services}: CI lists it, so missing packages fail there. */
    static final String SERVICE = "patroni";

    private static final Path PATRONI = Path.of("/usr/bin/patroni");
    private static final Path ETCD = Path.of("/usr/bin/etcd");
    private static final HttpClient HTTP =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    private final Path root;
    private final List<Member> members = new ArrayList<>();
    private Process etcd;

    /** One Patroni member: its server's port, the proxy it advertises, its REST API port, its process tree. */
    static final class Member {
        final String name;
        final int port;
        final int restPort;
        final FaultProxy replication;
        Process process;

        private Member(String name) throws IOException {
            this.name = name;
            this.port = FreePorts.loopback();
            this.restPort = FreePorts.loopback();
            this.replication = FaultProxy.start(new InetSocketAddress("127.0.0.1", port), WireProtocol.RAW);
        }

        String hostPort() {
            return "127.0.0.1:" + port;
        }

        String jdbcUrl() {
            return "jdbc:postgresql://" + hostPort() + "/postgres?user=postgres";
        }
    }

    private LocalPatroni(Path root) {
        this.root = root;
    }

    /** Why a cluster cannot be started here, or null when it can. */
    static String unavailable() {
        if (!Files.isExecutable(PATRONI) || !Files.isExecutable(ETCD)) {
            return "no " + PATRONI + " or " + ETCD + ": apt-get install patroni etcd-server";
        }
        String pg = LocalPostgres.unavailable();
        if (pg != null) {
            return pg;
        }
        return Files.isDirectory(Path.of("/usr/lib/postgresql")) ? null : "no Debian PostgreSQL server binaries";
    }

    /** Skips the calling test (fails it where CI requires Patroni) when no cluster can be started. */
    static void assumeAvailable() {
        String why = unavailable();
        if (why != null) {
            throw Services.unavailable(
                    SERVICE,
                    "install Debian's patroni, etcd-server and postgresql (the CI script does)",
                    new IllegalStateException(why));
        }
    }

    /**
     * Starts etcd, then {@code size} members with {@code synchronous_mode} as given; returns when the
     * first is the leader and every other one streams from it (as its synchronous standby when on).
     */
    static LocalPatroni start(int size, boolean synchronous) throws IOException, InterruptedException {
        LocalPatroni p = new LocalPatroni(LocalPostgres.tempRoot("patroni"));
        try {
            for (int i = 1; i <= size; i++) {
                p.members.add(new Member("m" + i));
            }
            int etcdClient = FreePorts.loopback();
            int etcdPeer = FreePorts.loopback();
            p.etcd = p.launch(
                    "etcd",
                    List.of(
                            ETCD.toString(),
                            "--name=e1",
                            "--data-dir=" + p.root.resolve("etcd"),
                            "--listen-client-urls=http://127.0.0.1:" + etcdClient,
                            "--advertise-client-urls=http://127.0.0.1:" + etcdClient,
                            "--listen-peer-urls=http://127.0.0.1:" + etcdPeer,
                            "--initial-advertise-peer-urls=http://127.0.0.1:" + etcdPeer,
                            "--initial-cluster=e1=http://127.0.0.1:" + etcdPeer));
            for (Member m : p.members) {
                p.writeConfig(m, etcdClient, synchronous);
            }
            Member first = p.members.get(0);
            first.process = p.launch(
                    first.name,
                    List.of(
                            PATRONI.toString(),
                            p.root.resolve(first.name + ".yml").toString()));
            p.await(first.name + " leader", () -> p.status(first, "/leader") == 200);
            for (Member m : p.members.subList(1, size)) {
                m.process = p.launch(
                        m.name,
                        List.of(
                                PATRONI.toString(),
                                p.root.resolve(m.name + ".yml").toString()));
            }
            for (Member m : p.members.subList(1, size)) {
                p.await(
                        m.name + (synchronous ? " synchronous standby" : " streaming replica"),
                        () -> p.status(m, synchronous ? "/sync" : "/replica") == 200);
            }
            return p;
        } catch (IOException | InterruptedException | RuntimeException e) {
            p.close();
            throw e;
        }
    }

    List<Member> members() {
        return members;
    }

    /** The member whose REST API answers 200 on /leader, or null. */
    Member leader() {
        for (Member m : members) {
            if (m.process != null && m.process.isAlive() && status(m, "/leader") == 200) {
                return m;
            }
        }
        return null;
    }

    /** Every member's server, in one pgjdbc multi-host list. */
    String hosts() {
        return String.join(",", members.stream().map(Member::hostPort).toList());
    }

    /** SIGKILL to the member's Patroni and its PostgreSQL, every process at once: the machine died. */
    void kill(Member m) {
        if (m.process == null) {
            return;
        }
        List<ProcessHandle> all =
                new ArrayList<>(m.process.toHandle().descendants().toList());
        all.add(0, m.process.toHandle());
        // Patroni starts the postmaster through a helper that exits, so it is not a descendant.
        try {
            Path pidFile = root.resolve(m.name).resolve("postmaster.pid");
            if (Files.exists(pidFile)) {
                ProcessHandle.of(Long.parseLong(
                                Files.readAllLines(pidFile).get(0).strip()))
                        .ifPresent(pm -> {
                            all.add(pm);
                            all.addAll(pm.descendants().toList());
                        });
            }
        } catch (IOException | RuntimeException e) {
            // no pid file: the server is not running
        }
        all.forEach(ProcessHandle::destroyForcibly);
        for (ProcessHandle h : all) {
            h.onExit().orTimeout(30, TimeUnit.SECONDS).exceptionally(e -> h).join();
        }
    }

    private void writeConfig(Member m, int etcdClient, boolean synchronous) throws IOException, InterruptedException {
        Path data = root.resolve(m.name);
        String yml = "scope: once-chaos\n"
                + "name: " + m.name + "\n"
                + "log:\n  level: WARNING\n"
                + "restapi:\n  listen: 127.0.0.1:" + m.restPort + "\n  connect_address: 127.0.0.1:" + m.restPort + "\n"
                + "etcd3:\n  hosts: 127.0.0.1:" + etcdClient + "\n"
                + "bootstrap:\n"
                + "  dcs:\n"
                + "    ttl: 10\n    loop_wait: 1\n    retry_timeout: 4\n"
                + "    maximum_lag_on_failover: 104857600\n"
                + "    synchronous_mode: " + synchronous + "\n"
                + "    postgresql:\n"
                + "      use_pg_rewind: false\n"
                + "      parameters:\n"
                + "        fsync: 'off'\n        full_page_writes: 'off'\n        wal_receiver_status_interval: 1\n"
                + "        max_connections: 100\n"
                + "  initdb:\n  - encoding: UTF8\n  - auth: trust\n"
                + "  pg_hba:\n  - local all all trust\n  - host all all 127.0.0.1/32 trust\n"
                + "  - host replication all 127.0.0.1/32 trust\n"
                + "postgresql:\n"
                + "  listen: 127.0.0.1:" + m.port + "\n"
                // The replicas stream from the leader's connect_address: the proxy the test can freeze.
                + "  connect_address: 127.0.0.1:" + m.replication.port() + "\n"
                + "  data_dir: " + data + "\n"
                + "  bin_dir: " + pgBin() + "\n"
                + "  pgpass: " + root.resolve(m.name + ".pgpass") + "\n"
                + "  authentication:\n"
                + "    replication:\n      username: postgres\n"
                + "    superuser:\n      username: postgres\n"
                + "  parameters:\n    unix_socket_directories: '" + root + "'\n"
                + "  pg_hba:\n  - local all all trust\n  - host all all 127.0.0.1/32 trust\n"
                + "  - host replication all 127.0.0.1/32 trust\n";
        Files.writeString(root.resolve(m.name + ".yml"), yml, StandardCharsets.UTF_8);
        chownIfRoot();
    }

    private static Path pgBin() throws IOException {
        try (Stream<Path> versions = Files.list(Path.of("/usr/lib/postgresql"))) {
            return versions.map(v -> v.resolve("bin"))
                    .filter(b -> Files.isExecutable(b.resolve("pg_ctl")))
                    .max(Comparator.comparing(b -> Integer.parseInt(
                            b.getParent().getFileName().toString().replaceAll("\\D", "0"))))
                    .orElseThrow(() -> new IllegalStateException("no /usr/lib/postgresql/N/bin/pg_ctl"));
        }
    }

    private Process launch(String name, List<String> command) throws IOException {
        List<String> full = new ArrayList<>();
        if (LocalPostgres.isRoot()) {
            full.addAll(List.of("runuser", "-u", "postgres", "--"));
        }
        full.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(full)
                .redirectErrorStream(true)
                .redirectOutput(root.resolve(name + ".log").toFile());
        pb.environment().put("HOME", root.toString());
        return pb.start();
    }

    /** The HTTP status of a Patroni health endpoint, or -1 when the member does not answer. */
    int status(Member m, String path) {
        try {
            return HTTP.send(
                            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + m.restPort + path))
                                    .timeout(Duration.ofSeconds(2))
                                    .build(),
                            HttpResponse.BodyHandlers.discarding())
                    .statusCode();
        } catch (IOException e) {
            return -1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    private interface Condition {
        boolean holds();
    }

    private void await(String what, Condition condition) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
        while (System.nanoTime() < deadline) {
            if (condition.holds()) {
                return;
            }
            for (Member m : members) {
                if (m.process != null && !m.process.isAlive()) {
                    throw new IllegalStateException("patroni member " + m.name + " exited; " + log(m.name));
                }
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("patroni: no " + what + " within 2 minutes; "
                + String.join("; ", members.stream().map(m -> log(m.name)).toList()));
    }

    private String log(String name) {
        try {
            List<String> lines = Files.readAllLines(root.resolve(name + ".log"));
            return name + " log:\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 15), lines.size()));
        } catch (IOException e) {
            return name + ": no log";
        }
    }

    @Override
    public void close() throws IOException {
        for (Member m : members) {
            kill(m);
            m.replication.close();
        }
        if (etcd != null) {
            List<ProcessHandle> all =
                    new ArrayList<>(etcd.toHandle().descendants().toList());
            all.add(etcd.toHandle());
            all.forEach(ProcessHandle::destroyForcibly);
        }
        LocalPostgres.delete(root);
    }

    private void chownIfRoot() throws IOException, InterruptedException {
        if (LocalPostgres.isRoot()) {
            Process p = new ProcessBuilder("chown", "-R", "postgres:", root.toString())
                    .redirectErrorStream(true)
                    .start();
            p.getInputStream().readAllBytes();
            p.waitFor();
        }
    }
}
