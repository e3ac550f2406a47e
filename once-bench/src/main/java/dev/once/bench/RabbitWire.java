package dev.once.bench;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.MetricsCollector;
import java.io.FilterInputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.SocketFactory;

/**
 * What a RabbitMQ row sends and gets back, counted on the client's connection, none of it moved by
 * the machine's load (issue 21 item 5: where the relay loses to its bare loop): messages published,
 * the confirm frames that acknowledge them (a confirm may cover every message up to its sequence
 * number), the channels published on, the bytes each way; and the CPU time of the broker's process
 * ({@code beam.smp}, read from {@code /proc}; shared with whatever else uses the broker meanwhile)
 * and of this JVM per message. The connection factory takes it as its metrics collector and socket
 * factory. Thread-safe.
 */
final class RabbitWire implements MetricsCollector {

    private final AtomicLong published = new AtomicLong();
    private final AtomicLong confirms = new AtomicLong();
    private final AtomicLong multiple = new AtomicLong();
    private final AtomicLong bytesOut = new AtomicLong();
    private final AtomicLong bytesIn = new AtomicLong();
    private final Set<Integer> channels = ConcurrentHashMap.newKeySet();
    private final Path broker = brokerStat();

    /** The counts at one moment, to subtract. */
    record Snapshot(long published, long confirms, long multiple, long out, long in, long brokerTicks, long jvmNanos) {}

    Snapshot snapshot() {
        channels.clear();
        return new Snapshot(
                published.get(),
                confirms.get(),
                multiple.get(),
                bytesOut.get(),
                bytesIn.get(),
                brokerTicks(),
                RelaySuite.cpuNanos());
    }

    /** Since {@code from}, per message acknowledged ({@code messages}: the row's own count). */
    String since(Snapshot from, long messages) {
        long p = published.get() - from.published();
        long c = confirms.get() - from.confirms();
        long ticks = brokerTicks();
        double n = Math.max(1, messages);
        return String.format(
                Locale.ROOT,
                "%d published on %d channel(s), %d confirm frames (%.1f messages per confirm, %.0f%% of them"
                        + " covering several), %.0f bytes out and %.0f in per message; CPU per message: the"
                        + " broker %s, this JVM %.0f us",
                p,
                channels.size(),
                c,
                p / (double) Math.max(1, c),
                100.0 * (multiple.get() - from.multiple()) / Math.max(1, c),
                (bytesOut.get() - from.out()) / (double) Math.max(1, p),
                (bytesIn.get() - from.in()) / (double) Math.max(1, p),
                ticks < 0 || from.brokerTicks() < 0
                        ? "unknown"
                        : String.format(Locale.ROOT, "%.0f us", (ticks - from.brokerTicks()) * 1e6 / 100 / n),
                (RelaySuite.cpuNanos() - from.jvmNanos()) / 1e3 / n);
    }

    /** The broker's utime + stime in clock ticks (100 a second on Linux), or -1 when it cannot be read. */
    private long brokerTicks() {
        if (broker == null) {
            return -1;
        }
        try {
            String stat = Files.readString(broker);
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    // The one beam.smp on the machine (the broker the rows use), else none.
    private static Path brokerStat() {
        try (var procs = Files.list(Path.of("/proc"))) {
            var beams = procs.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit))
                    .filter(p -> {
                        try {
                            return Files.readString(p.resolve("comm")).strip().equals("beam.smp");
                        } catch (IOException e) {
                            return false;
                        }
                    })
                    .toList();
            return beams.size() == 1 ? beams.get(0).resolve("stat") : null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** A socket factory whose sockets count the bytes they carry. */
    SocketFactory sockets() {
        return new SocketFactory() {
            @Override
            public Socket createSocket() {
                return new Counted();
            }

            @Override
            public Socket createSocket(String host, int port) throws IOException {
                Socket s = new Counted();
                s.connect(new java.net.InetSocketAddress(host, port));
                return s;
            }

            @Override
            public Socket createSocket(String host, int port, InetAddress local, int localPort) throws IOException {
                Socket s = new Counted();
                s.bind(new java.net.InetSocketAddress(local, localPort));
                s.connect(new java.net.InetSocketAddress(host, port));
                return s;
            }

            @Override
            public Socket createSocket(InetAddress host, int port) throws IOException {
                Socket s = new Counted();
                s.connect(new java.net.InetSocketAddress(host, port));
                return s;
            }

            @Override
            public Socket createSocket(InetAddress host, int port, InetAddress local, int localPort)
                    throws IOException {
                Socket s = new Counted();
                s.bind(new java.net.InetSocketAddress(local, localPort));
                s.connect(new java.net.InetSocketAddress(host, port));
                return s;
            }
        };
    }

    private final class Counted extends Socket {
        @Override
        public InputStream getInputStream() throws IOException {
            return new FilterInputStream(super.getInputStream()) {
                @Override
                public int read() throws IOException {
                    int b = super.read();
                    if (b >= 0) {
                        bytesIn.incrementAndGet();
                    }
                    return b;
                }

                @Override
                public int read(byte[] b, int off, int len) throws IOException {
                    int n = in(super.read(b, off, len));
                    return n;
                }
            };
        }

        @Override
        public OutputStream getOutputStream() throws IOException {
            return new FilterOutputStream(super.getOutputStream()) {
                @Override
                public void write(int b) throws IOException {
                    bytesOut.incrementAndGet();
                    super.out.write(b);
                }

                @Override
                public void write(byte[] b, int off, int len) throws IOException {
                    bytesOut.addAndGet(len);
                    super.out.write(b, off, len);
                }
            };
        }

        private int in(int n) {
            if (n > 0) {
                bytesIn.addAndGet(n);
            }
            return n;
        }
    }

    @Override
    public void basicPublish(Channel channel) {
        published.incrementAndGet();
        channels.add(channel.getChannelNumber());
    }

    @Override
    public void basicPublishAck(Channel channel, long deliveryTag, boolean several) {
        confirms.incrementAndGet();
        if (several) {
            multiple.incrementAndGet();
        }
    }

    @Override
    public void basicPublishNack(Channel channel, long deliveryTag, boolean several) {
        confirms.incrementAndGet();
    }

    @Override
    public void newConnection(Connection connection) {}

    @Override
    public void closeConnection(Connection connection) {}

    @Override
    public void newChannel(Channel channel) {}

    @Override
    public void closeChannel(Channel channel) {}

    @Override
    public void consumedMessage(Channel channel, long deliveryTag, boolean autoAck) {}

    @Override
    public void consumedMessage(Channel channel, long deliveryTag, String consumerTag) {}

    @Override
    public void basicAck(Channel channel, long deliveryTag, boolean multiple) {}

    @Override
    public void basicNack(Channel channel, long deliveryTag) {}

    @Override
    public void basicReject(Channel channel, long deliveryTag) {}

    @Override
    public void basicConsume(Channel channel, String consumerTag, boolean autoAck) {}

    @Override
    public void basicCancel(Channel channel, String consumerTag) {}
}
