package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.testkit.fault.CommitFault;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.TestDatabase;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The fault proxy itself: it forwards exactly, and each fault does what it says, on raw TCP and on both databases. */
@Tag("chaos")
class FaultProxyTest {

    private ServerSocket echo;

    @BeforeEach
    void startEcho() throws IOException {
        echo = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(() -> {
            while (!echo.isClosed()) {
                try {
                    Socket s = echo.accept();
                    Thread c = new Thread(() -> {
                        try (s;
                                InputStream in = s.getInputStream();
                                OutputStream out = s.getOutputStream()) {
                            in.transferTo(out);
                        } catch (IOException ignored) {
                            // the tests reset these connections on purpose
                        }
                    });
                    c.setDaemon(true);
                    c.start();
                } catch (IOException e) {
                    return;
                }
            }
        });
        t.setDaemon(true);
        t.start();
    }

    @AfterEach
    void stopEcho() throws IOException {
        echo.close();
    }

    private FaultProxy rawProxy() throws IOException {
        return FaultProxy.start(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), echo.getLocalPort()), WireProtocol.RAW);
    }

    private static Socket connect(FaultProxy proxy) throws IOException {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), proxy.port());
        s.setSoTimeout(10_000);
        return s;
    }

    @Test
    void forwardsEveryByteBothWaysUnchanged() throws Exception {
        try (FaultProxy proxy = rawProxy();
                Socket s = connect(proxy)) {
            byte[] sent = new byte[1 << 20];
            new Random(7).nextBytes(sent);
            Thread writer = new Thread(() -> {
                try {
                    s.getOutputStream().write(sent);
                    s.shutdownOutput();
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            });
            writer.start();
            byte[] received = s.getInputStream().readAllBytes();
            writer.join();
            assertThat(received).as("bytes echoed through the proxy").isEqualTo(sent);
        }
    }

    @Test
    void aFrozenLinkForwardsNothingUntilThawedThenEverything() throws Exception {
        try (FaultProxy proxy = rawProxy();
                Socket s = connect(proxy)) {
            s.getOutputStream().write(1);
            assertThat(s.getInputStream().read()).isEqualTo(1);
            proxy.freeze();
            s.getOutputStream().write(2);
            s.setSoTimeout(500);
            assertThatThrownBy(() -> s.getInputStream().read())
                    .as("nothing crosses a frozen link")
                    .isInstanceOf(SocketTimeoutException.class);
            try (Socket late = connect(proxy)) {
                late.setSoTimeout(300);
                late.getOutputStream().write(3);
                assertThatThrownBy(() -> late.getInputStream().read())
                        .as("a connection accepted while frozen")
                        .isInstanceOf(SocketTimeoutException.class);
                proxy.thaw();
                late.setSoTimeout(10_000);
                assertThat(late.getInputStream().read()).isEqualTo(3);
            }
            s.setSoTimeout(10_000);
            assertThat(s.getInputStream().read())
                    .as("held back while frozen, delivered after")
                    .isEqualTo(2);
        }
    }

    @Test
    void resetAbortsBothSides() throws Exception {
        try (FaultProxy proxy = rawProxy();
                Socket s = connect(proxy)) {
            s.getOutputStream().write(1);
            assertThat(s.getInputStream().read()).isEqualTo(1);
            assertThat(proxy.openConnections()).isEqualTo(1);
            assertThat(proxy.reset()).isEqualTo(1);
            assertThatThrownBy(() -> s.getInputStream().read())
                    .as("the client sees a reset, not an orderly end")
                    .isInstanceOf(SocketException.class)
                    .hasMessageContaining("reset");
            assertThat(proxy.openConnections()).isZero();
            try (Socket again = connect(proxy)) {
                again.getOutputStream().write(9);
                assertThat(again.getInputStream().read())
                        .as("new connections work after a reset")
                        .isEqualTo(9);
            }
        }
    }

    @Test
    void latencyDelaysEachDirection() throws Exception {
        try (FaultProxy proxy = rawProxy();
                Socket s = connect(proxy)) {
            s.getOutputStream().write(1);
            s.getInputStream().read();
            proxy.latency(Duration.ofMillis(100));
            long start = System.nanoTime();
            s.getOutputStream().write(2);
            assertThat(s.getInputStream().read()).isEqualTo(2);
            long tookMs = (System.nanoTime() - start) / 1_000_000;
            assertThat(tookMs).as("a round trip through 100 ms each way").isBetween(200L, 2_000L);
            proxy.latency(Duration.ZERO);
        }
    }

    @Test
    void refusesAnUpstreamOffLoopbackAndUrlsItCannotProxy() {
        assertThatThrownBy(() -> FaultProxy.start(new InetSocketAddress("192.0.2.1", 5432), WireProtocol.RAW))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("loopback");
        assertThatThrownBy(() -> FaultProxy.forJdbcUrl("jdbc:postgresql://127.0.0.1:5432,127.0.0.1:5433/test"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("one host");
        assertThatThrownBy(() -> FaultProxy.forJdbcUrl("jdbc:h2:mem:x"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("jdbc:h2:mem:x");
        try (FaultProxy raw =
                FaultProxy.start(new InetSocketAddress(InetAddress.getLoopbackAddress(), 1), WireProtocol.RAW)) {
            assertThatThrownBy(() -> raw.failNextCommit(CommitFault.DROP_REPLY))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("RAW");
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void postgresCommitRequestAndReplyCanBeDropped() throws Exception {
        try (TestDatabase db = Databases.POSTGRES.fresh(2)) {
            commitFaults(db, Databases.POSTGRES.directUrl(db));
        }
    }

    @Test
    void mariaDbCommitRequestAndReplyCanBeDropped() throws Exception {
        try (TestDatabase db = Databases.MARIADB.fresh(2)) {
            commitFaults(db, Databases.MARIADB.directUrl(db));
        }
    }

    /**
     * Many transactions on one connection first (pgjdbc names its COMMIT statement after the first
     * use, so later commits are a bare Bind), then each fault: the reply dropped means committed and
     * the client told otherwise; the request dropped means rolled back.
     */
    private static void commitFaults(TestDatabase db, String directUrl) throws Exception {
        db.execute("CREATE TABLE t (id int PRIMARY KEY)");
        try (FaultProxy proxy = FaultProxy.forJdbcUrl(directUrl)) {
            String url = proxy.jdbcUrl(directUrl);
            int id = 0;
            try (Connection c = DriverManager.getConnection(url)) {
                c.setAutoCommit(false);
                for (int i = 0; i < 10; i++) {
                    insert(c, ++id);
                    c.commit();
                }
                assertThat(proxy.commitsSeen())
                        .as("commits recognised on the wire")
                        .isEqualTo(10);
                proxy.failNextCommit(CommitFault.DROP_REPLY);
                insert(c, ++id);
                assertThatThrownBy(c::commit)
                        .as("commit whose reply was dropped")
                        .isInstanceOf(SQLException.class);
            }
            assertThat(db.queryLong("SELECT count(*) FROM t WHERE id = " + id))
                    .as("reply dropped: committed")
                    .isEqualTo(1);
            try (Connection c = DriverManager.getConnection(url)) {
                c.setAutoCommit(false);
                for (int i = 0; i < 3; i++) {
                    insert(c, ++id);
                    c.commit();
                }
                proxy.failNextCommit(CommitFault.DROP_REQUEST);
                insert(c, ++id);
                assertThatThrownBy(c::commit)
                        .as("commit whose request was dropped")
                        .isInstanceOf(SQLException.class);
            }
            int dropped = id;
            org.awaitility.Awaitility.await("the server notices the reset and rolls back")
                    .atMost(Duration.ofSeconds(10))
                    .until(() -> db.queryLong("SELECT count(*) FROM t WHERE id = " + dropped) == 0
                            && db.queryLong("SELECT count(*) FROM t") == dropped - 1);
            assertThat(proxy.commitsFailed()).isEqualTo(2);
        }
    }

    private static void insert(Connection c, int id) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.executeUpdate("INSERT INTO t VALUES (" + id + ")");
        }
    }
}
