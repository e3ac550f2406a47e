package dev.once.testsupport;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Ports for servers a test starts later on the loopback address (a database, an emulator, a proxy a
 * broker advertises before the proxy listens), taken below the kernel's ephemeral range. A port from
 * {@code new ServerSocket(0)} lies in that range and stays free only until the server binds it,
 * seconds later; meanwhile any outgoing connection (a pool's, a broker's, the other test JVM's
 * clients) may be given it: Patroni's REST API once failed with "Address already in use". Below the
 * range only another explicit pick can take it: this JVM never hands one out twice, and a random pick
 * keeps a module's test JVMs apart. Thread-safe.
 */
public final class FreePorts {

    // The ports handed out by this JVM: never twice, even once the server on one has stopped.
    private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();

    private static final int TRIES = 500;

    private FreePorts() {}

    /**
     * A loopback port free now (bind-checked), below the kernel's ephemeral range, never returned before by
     * this JVM; the kernel's pick when the range leaves no room below it.
     *
     * @throws IOException when no port is free after {@value #TRIES} random picks
     */
    public static int loopback() throws IOException {
        int low = ephemeralLow();
        if (low < 4_096) {
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                return s.getLocalPort();
            }
        }
        for (int tries = 0; tries < TRIES; tries++) {
            int port = ThreadLocalRandom.current().nextInt(low / 3, low);
            if (!HANDED_OUT.add(port)) {
                continue;
            }
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
                return port;
            } catch (IOException taken) {
                // held by a server already: another
            }
        }
        throw new IOException(
                "no free loopback port between " + low / 3 + " and " + low + " after " + TRIES + " tries");
    }

    /**
     * The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range; Linux's default 32768). Read
     * by lines: the file says its size is 0, and {@code Files.readString} (JDK 17) then gave its first byte
     * only, "3", so every port was the kernel's pick.
     */
    private static int ephemeralLow() {
        try {
            return Integer.parseInt(Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))
                    .get(0)
                    .trim()
                    .split("\\s+")[0]);
        } catch (IOException | RuntimeException unreadable) {
            return 32_768;
        }
    }
}
