package dev.once.testkit.fault;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A TCP proxy on the loopback interface that injects network faults between a client (a JDBC
 * pool, a broker client) and its server: {@link #freeze() freeze} (connections are accepted,
 * nothing is forwarded until {@link #thaw()}), {@link #reset() reset} (every open connection is
 * aborted with a TCP RST on both sides), {@link #latency(Duration) latency} (every byte arrives
 * later, in each direction) and, for PostgreSQL and MariaDB, {@link #failNextCommit(CommitFault)}:
 * the next {@code COMMIT} request, or the server's reply to it, is dropped and the connection
 * reset, so the client cannot know whether its transaction committed.
 *
 * <pre>{@code
 * try (FaultProxy proxy = FaultProxy.forJdbcUrl(postgresUrl)) {
 *     HikariDataSource ds = pool(proxy.jdbcUrl(postgresUrl));
 *     proxy.failNextCommit(CommitFault.DROP_REPLY);   // committed, but the client hears a broken pipe
 * }
 * }</pre>
 *
 * <p>Plain {@code java.nio} channels in blocking mode, four daemon threads per proxied connection
 * (a reader and a writer per direction; the writer holds a chunk back for the latency and while
 * frozen). Both ends must be loopback addresses: it is a test tool, never a network service.
 * Thread-safe: faults may be injected from any thread while traffic flows.
 */
public final class FaultProxy implements AutoCloseable {

    private static final Pattern JDBC_HOST_PORT = Pattern.compile("^(jdbc:[a-z]+://)([^/:?,]+)(?::(\\d+))?(.*)$");
    private static final int CHUNK = 64 * 1024;
    private static final int QUEUED_CHUNKS = 64;

    private final InetSocketAddress upstream;
    private final WireProtocol protocol;
    private final ServerSocketChannel listener;
    private final Set<Link> links = ConcurrentHashMap.newKeySet();
    private final Object freezeLock = new Object();
    private volatile boolean frozen;
    private volatile long latencyNanos;
    private final AtomicReference<CommitFault> armed = new AtomicReference<>();
    private final AtomicLong accepted = new AtomicLong();
    private final AtomicLong commitsSeen = new AtomicLong();
    private final AtomicLong commitsFailed = new AtomicLong();
    private final AtomicLong resets = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();

    private FaultProxy(InetSocketAddress upstream, WireProtocol protocol, int port) throws IOException {
        this.upstream = upstream;
        this.protocol = protocol;
        this.listener = ServerSocketChannel.open();
        listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        Thread acceptor = new Thread(this::acceptLoop, "fault-proxy-accept-" + port());
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /**
     * Starts a proxy to {@code upstream} on a free loopback port.
     *
     * @throws IllegalArgumentException if {@code upstream} is not a loopback address
     * @throws IOException if no port can be bound
     */
    public static FaultProxy start(InetSocketAddress upstream, WireProtocol protocol) throws IOException {
        return start(upstream, protocol, 0);
    }

    /**
     * Starts a proxy to {@code upstream} on the given loopback port (0 for any free one), for a
     * server that must name the proxy's address before the proxy can know the server's, such as a
     * Kafka broker advertising it.
     *
     * @throws IllegalArgumentException if {@code upstream} is not a loopback address
     * @throws IOException if the port cannot be bound
     */
    public static FaultProxy start(InetSocketAddress upstream, WireProtocol protocol, int port) throws IOException {
        Objects.requireNonNull(upstream, "upstream");
        Objects.requireNonNull(protocol, "protocol");
        if (upstream.isUnresolved() || !upstream.getAddress().isLoopbackAddress()) {
            throw new IllegalArgumentException("FaultProxy forwards to loopback addresses only, but upstream was "
                    + upstream + "; run the server on 127.0.0.1");
        }
        return new FaultProxy(upstream, protocol, port);
    }

    /**
     * Starts a proxy to the server of a PostgreSQL, MariaDB or MySQL JDBC URL (one host), with the
     * matching {@link WireProtocol}.
     *
     * @throws IllegalArgumentException if the URL names another database, several hosts or a non-loopback host
     */
    public static FaultProxy forJdbcUrl(String jdbcUrl) throws IOException {
        Matcher m = matchJdbc(jdbcUrl);
        WireProtocol protocol;
        int defaultPort;
        if (m.group(1).startsWith("jdbc:postgresql:")) {
            protocol = WireProtocol.POSTGRES;
            defaultPort = 5432;
        } else if (m.group(1).startsWith("jdbc:mariadb:") || m.group(1).startsWith("jdbc:mysql:")) {
            protocol = WireProtocol.MARIADB;
            defaultPort = 3306;
        } else {
            throw new IllegalArgumentException("FaultProxy.forJdbcUrl takes a jdbc:postgresql, jdbc:mariadb or"
                    + " jdbc:mysql URL, but was '" + jdbcUrl + "'");
        }
        int port = m.group(3) == null ? defaultPort : Integer.parseInt(m.group(3));
        return start(new InetSocketAddress(m.group(2), port), protocol);
    }

    /** {@code jdbcUrl} with its host and port replaced by this proxy's. */
    public String jdbcUrl(String jdbcUrl) {
        Matcher m = matchJdbc(jdbcUrl);
        return m.group(1) + "127.0.0.1:" + port() + m.group(4);
    }

    private static Matcher matchJdbc(String jdbcUrl) {
        Matcher m = JDBC_HOST_PORT.matcher(Objects.requireNonNull(jdbcUrl, "jdbcUrl"));
        if (!m.matches() || m.group(4).startsWith(",")) {
            throw new IllegalArgumentException("expected a JDBC URL with one host, jdbc:SUBPROTOCOL://HOST[:PORT]/…,"
                    + " but was '" + jdbcUrl + "'");
        }
        return m;
    }

    /** The loopback port clients connect to. */
    public int port() {
        try {
            return ((InetSocketAddress) listener.getLocalAddress()).getPort();
        } catch (IOException e) {
            throw new IllegalStateException("proxy listener is closed", e);
        }
    }

    /** The server the proxy forwards to. */
    public InetSocketAddress upstream() {
        return upstream;
    }

    /** Stops forwarding in both directions; connections stay open and new ones are accepted but not forwarded. */
    public void freeze() {
        frozen = true;
    }

    /** Forwards again, including whatever was held back while frozen (as TCP retransmits after a partition heals). */
    public void thaw() {
        synchronized (freezeLock) {
            frozen = false;
            freezeLock.notifyAll();
        }
    }

    public boolean frozen() {
        return frozen;
    }

    /** Aborts every open connection with a TCP RST to both the client and the server; returns how many. */
    public int reset() {
        int n = 0;
        for (Link link : links) {
            link.reset();
            n++;
        }
        return n;
    }

    /** Delays every chunk by {@code oneWay} in each direction (a round trip costs twice that); zero removes it. */
    public void latency(Duration oneWay) {
        if (oneWay.isNegative()) {
            throw new IllegalArgumentException("latency must be zero or more, but was " + oneWay);
        }
        latencyNanos = oneWay.toNanos();
    }

    /**
     * Fails the next commit on any connection: drops its request or its reply, then resets that
     * connection on both sides. Holds until a commit comes; a second call replaces the first.
     *
     * @throws IllegalStateException if the protocol is {@link WireProtocol#RAW}
     */
    public void failNextCommit(CommitFault fault) {
        Objects.requireNonNull(fault, "fault");
        if (protocol == WireProtocol.RAW) {
            throw new IllegalStateException(
                    "commit faults need WireProtocol.POSTGRES or MARIADB, but this proxy is RAW");
        }
        armed.set(fault);
    }

    /** Cancels a {@link #failNextCommit} that no commit has taken yet; returns it, or null. */
    public CommitFault disarm() {
        return armed.getAndSet(null);
    }

    /** Connections accepted since start. */
    public long connectionsAccepted() {
        return accepted.get();
    }

    /** Connections open now. */
    public int openConnections() {
        return links.size();
    }

    /** Commit requests seen so far (PostgreSQL and MariaDB). */
    public long commitsSeen() {
        return commitsSeen.get();
    }

    /** Commits failed by {@link #failNextCommit}. */
    public long commitsFailed() {
        return commitsFailed.get();
    }

    /** Connections aborted, by {@link #reset()} or by a commit fault. */
    public long resets() {
        return resets.get();
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                listener.close();
            } catch (IOException ignored) {
                // closing anyway
            }
            thaw();
            reset();
        }
    }

    private void acceptLoop() {
        while (!closed.get()) {
            SocketChannel client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return; // closed
            }
            accepted.incrementAndGet();
            Link link = new Link(client);
            links.add(link);
            Thread t = new Thread(link::open, "fault-proxy-link-" + port() + "-" + accepted.get());
            t.setDaemon(true);
            t.start();
        }
    }

    private void awaitThaw() throws InterruptedException {
        synchronized (freezeLock) {
            while (frozen && !closed.get()) {
                freezeLock.wait(100);
            }
        }
    }

    /** Bytes read from one side, to be written to the other no earlier than {@code dueNanos}; empty means end of stream. */
    private record Chunk(byte[] bytes, long dueNanos) {}

    /** One proxied connection: a client channel, a server channel, a pump per direction. */
    private final class Link implements WireInspector.Verdicts {
        private final SocketChannel client;
        private volatile SocketChannel server;
        private final AtomicBoolean done = new AtomicBoolean();
        private final WireInspector inspector = WireInspector.of(protocol, this);
        private volatile boolean replyToDrop;
        private int halfClosed;

        Link(SocketChannel client) {
            this.client = client;
        }

        void open() {
            try {
                awaitThaw(); // frozen: accept, but not even the connection reaches the server
                SocketChannel s = SocketChannel.open();
                server = s;
                if (done.get()) {
                    s.close();
                    return;
                }
                s.connect(upstream);
                client.setOption(StandardSocketOptions.TCP_NODELAY, true);
                s.setOption(StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException | InterruptedException e) {
                reset();
                return;
            }
            pump(client, server, inspector == null ? null : inspector.client(), "up");
            pump(server, client, inspector == null ? null : inspector.server(), "down");
        }

        private void pump(SocketChannel from, SocketChannel to, WireInspector.Side side, String direction) {
            BlockingQueue<Chunk> queue = new ArrayBlockingQueue<>(QUEUED_CHUNKS);
            Thread reader = new Thread(() -> read(from, side, queue), "fault-proxy-" + direction + "-read");
            Thread writer = new Thread(() -> write(to, queue), "fault-proxy-" + direction + "-write");
            reader.setDaemon(true);
            writer.setDaemon(true);
            reader.start();
            writer.start();
        }

        private void read(SocketChannel from, WireInspector.Side side, BlockingQueue<Chunk> queue) {
            ByteBuffer buffer = ByteBuffer.allocate(CHUNK);
            try {
                while (!done.get()) {
                    buffer.clear();
                    int n = from.read(buffer);
                    long at = System.nanoTime();
                    if (n < 0) {
                        queue.put(new Chunk(new byte[0], at + latencyNanos)); // end of stream: a half-close
                        return;
                    }
                    // Inspect before queueing: a commit request is marked before the server can answer it.
                    if (side != null && side.scan(buffer.array(), 0, n)) {
                        commitsFailed.incrementAndGet();
                        reset();
                        return;
                    }
                    queue.put(new Chunk(Arrays.copyOf(buffer.array(), n), at + latencyNanos));
                }
            } catch (IOException | InterruptedException e) {
                reset();
            }
        }

        private void write(SocketChannel to, BlockingQueue<Chunk> queue) {
            try {
                while (!done.get()) {
                    Chunk next = queue.take();
                    byte[] chunk = next.bytes();
                    long at = next.dueNanos();
                    for (long wait = at - System.nanoTime(); wait > 0; wait = at - System.nanoTime()) {
                        LockSupport.parkNanos(wait);
                    }
                    awaitThaw();
                    if (done.get()) {
                        return;
                    }
                    if (chunk.length == 0) {
                        to.shutdownOutput();
                        if (halfClose() == 2) {
                            close();
                        }
                        return;
                    }
                    ByteBuffer b = ByteBuffer.wrap(chunk);
                    while (b.hasRemaining()) {
                        to.write(b);
                    }
                }
            } catch (IOException | InterruptedException e) {
                reset();
            }
        }

        private synchronized int halfClose() {
            return ++halfClosed;
        }

        @Override
        public boolean commitRequest() {
            commitsSeen.incrementAndGet();
            if (armed.compareAndSet(CommitFault.DROP_REQUEST, null)) {
                return true;
            }
            if (armed.compareAndSet(CommitFault.DROP_REPLY, null)) {
                replyToDrop = true;
            }
            return false;
        }

        @Override
        public boolean commitReply() {
            if (replyToDrop) {
                replyToDrop = false;
                return true;
            }
            // A commit whose request was not recognised (a protocol variant) still has its reply dropped.
            return armed.compareAndSet(CommitFault.DROP_REPLY, null);
        }

        /** Aborts both sides: SO_LINGER 0 makes close send RST instead of FIN. */
        void reset() {
            if (done.compareAndSet(false, true)) {
                resets.incrementAndGet();
                abort(client);
                abort(server);
                links.remove(this);
            }
        }

        private void close() {
            if (done.compareAndSet(false, true)) {
                quietClose(client);
                quietClose(server);
                links.remove(this);
            }
        }

        private static void abort(SocketChannel channel) {
            if (channel == null) {
                return;
            }
            try {
                channel.setOption(StandardSocketOptions.SO_LINGER, 0);
            } catch (IOException ignored) {
                // already closed, or not connected: close below is all there is to do
            }
            quietClose(channel);
        }

        private static void quietClose(SocketChannel channel) {
            if (channel == null) {
                return;
            }
            try {
                channel.close();
            } catch (ClosedChannelException ignored) {
                // already closed
            } catch (IOException ignored) {
                // nothing more to do for a channel we are discarding
            }
        }
    }
}
