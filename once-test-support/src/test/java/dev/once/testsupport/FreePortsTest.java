package dev.once.testsupport;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class FreePortsTest {

    /**
     * Below the ephemeral range (where the kernel picks outgoing connections' ports, and where
     * {@code new ServerSocket(0)} picked: taken by a connection before the server bound it), free when
     * handed out, never twice.
     */
    @Test
    void portsBelowTheEphemeralRangeFreeAndNeverTwice() throws IOException {
        int low = Integer.parseInt(Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))
                .get(0)
                .trim()
                .split("\\s+")[0]);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            int port = FreePorts.loopback();
            assertTrue(port < low, port + " is not below the ephemeral range from " + low);
            assertTrue(seen.add(port), "port " + port + " handed out twice");
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            }
        }
    }
}
