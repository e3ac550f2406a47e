package dev.once.spring;

import com.zaxxer.hikari.HikariDataSource;
import java.io.ByteArrayOutputStream;
import java.io.FilterInputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import javax.net.SocketFactory;
import javax.sql.DataSource;

/**
 * The round trips a thread's PostgreSQL connections make, counted on the wire: pgjdbc opens its sockets
 * through this factory ({@code socketFactory=} in the URL, {@link #dataSource}), and every time a socket
 * is read after it was written, the client waited for the server once. Each trip is recorded with the
 * number of statements it executed and the SQL text its Parse messages carried (none for a statement the
 * server has prepared already), on the thread that waited: what a listener's transaction costs
 * in round trips, whatever the JDBC calls were.
 */
public final class WireRoundTrips extends SocketFactory {

    private static final ThreadLocal<List<String>> TRIPS = ThreadLocal.withInitial(ArrayList::new);

    /** Instantiated by pgjdbc. */
    public WireRoundTrips() {}

    /** A pool of {@code size} connections to {@code like}'s database whose round trips are counted. */
    static HikariDataSource dataSource(DataSource like, int size) {
        HikariDataSource pooled = (HikariDataSource) like;
        HikariDataSource ds = new HikariDataSource();
        ds.setJdbcUrl(pooled.getJdbcUrl() + "&socketFactory=" + WireRoundTrips.class.getName());
        ds.setMaximumPoolSize(size);
        return ds;
    }

    /** Forgets this thread's trips. */
    static void reset() {
        TRIPS.get().clear();
    }

    /** This thread's trips since {@link #reset}, each as {@code "2 statements: BEGIN | INSERT …"}. */
    static List<String> trips() {
        return List.copyOf(TRIPS.get());
    }

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
    public Socket createSocket(String host, int port, InetAddress localHost, int localPort) {
        throw new UnsupportedOperationException();
    }

    @Override
    public Socket createSocket(InetAddress host, int port) {
        throw new UnsupportedOperationException();
    }

    @Override
    public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort) {
        throw new UnsupportedOperationException();
    }

    /** A socket that notes a trip on the first read after a write. */
    private static final class Counted extends Socket {
        private final ByteArrayOutputStream sent = new ByteArrayOutputStream();
        private InputStream in;
        private OutputStream out;

        @Override
        public synchronized InputStream getInputStream() throws IOException {
            if (in == null) {
                in = new FilterInputStream(super.getInputStream()) {
                    @Override
                    public int read() throws IOException {
                        trip();
                        return super.read();
                    }

                    @Override
                    public int read(byte[] b, int off, int len) throws IOException {
                        trip();
                        return super.read(b, off, len);
                    }
                };
            }
            return in;
        }

        @Override
        public synchronized OutputStream getOutputStream() throws IOException {
            if (out == null) {
                out = new FilterOutputStream(super.getOutputStream()) {
                    @Override
                    public void write(int b) throws IOException {
                        sent.write(b);
                        super.write(b);
                    }

                    @Override
                    public void write(byte[] b, int off, int len) throws IOException {
                        sent.write(b, off, len);
                        out().write(b, off, len);
                    }
                };
            }
            return out;
        }

        private OutputStream out() throws IOException {
            return super.getOutputStream();
        }

        private void trip() {
            if (sent.size() == 0) {
                return;
            }
            byte[] bytes = sent.toByteArray();
            sent.reset();
            if (bytes[0] == 0) {
                return; // an SSL request or the startup message (no type byte, a length below 2^24): no statement's
            }
            TRIPS.get().add(describe(bytes));
        }

        // Frontend messages: a type byte, a length that counts itself, the body. Parse: name, SQL; Query: SQL.
        private static String describe(byte[] bytes) {
            ByteBuffer b = ByteBuffer.wrap(bytes);
            List<String> sql = new ArrayList<>();
            int executes = 0;
            while (b.remaining() >= 5) {
                byte type = b.get();
                int length = b.getInt();
                int body = b.position();
                if (type == 'P') {
                    int name = skipString(bytes, body);
                    sql.add(string(bytes, name));
                } else if (type == 'Q') {
                    sql.add(string(bytes, body));
                } else if (type == 'E') {
                    executes++;
                }
                b.position(body + length - 4);
            }
            return executes
                    + (executes == 1 ? " statement" : " statements")
                    + (sql.isEmpty() ? "" : ": ")
                    + String.join(" | ", sql);
        }

        private static int skipString(byte[] bytes, int from) {
            int i = from;
            while (bytes[i] != 0) {
                i++;
            }
            return i + 1;
        }

        private static String string(byte[] bytes, int from) {
            return new String(bytes, from, skipString(bytes, from) - 1 - from, StandardCharsets.UTF_8);
        }
    }
}
