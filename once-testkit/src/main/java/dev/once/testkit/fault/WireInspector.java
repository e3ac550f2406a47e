package dev.once.testkit.fault;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;

/**
 * Follows the frames of one proxied connection, both directions, to find the commit request and
 * its reply. It only observes: the proxy forwards the bytes it is given unless {@link Side#scan}
 * says a frame is to be dropped. Frames are followed byte by byte without buffering, so a frame
 * split across reads is recognised when its last byte arrives; whatever part of it was forwarded
 * before is harmless, since the connection is reset at once and a client never acts on half a frame.
 */
abstract class WireInspector {

    /** Answers, for a frame just completed, whether it must be dropped (and the link reset). */
    interface Verdicts {
        /** A commit request was seen on this connection; true to drop it. */
        boolean commitRequest();

        /** The server's reply to a commit was seen; true to drop it. */
        boolean commitReply();
    }

    /** How many leading body bytes are kept to classify a frame. */
    static final int PREFIX = 512;

    final Verdicts verdicts;
    /** Set once the stream is encrypted (or not understood): no more inspection, both sides. */
    volatile boolean opaque;

    WireInspector(Verdicts verdicts) {
        this.verdicts = verdicts;
    }

    static WireInspector of(WireProtocol protocol, Verdicts verdicts) {
        return switch (protocol) {
            case RAW -> null;
            case POSTGRES -> new Postgres(verdicts);
            case MARIADB -> new MariaDb(verdicts);
        };
    }

    abstract Side client();

    abstract Side server();

    /** One direction's framing state. */
    abstract class Side {
        private final byte[] header = new byte[8];
        private int headerFill;
        private int headerLength;
        private long bodyRemaining;
        private final byte[] prefix = new byte[PREFIX];
        private int prefixFill;
        private boolean inBody;

        /** Header length of the frame that starts now. */
        abstract int headerLength();

        /** Body length of a frame with this header; negative when the stream is not understood. */
        abstract long bodyLength(byte[] header);

        /** The frame is complete: true to drop it. */
        abstract boolean frame(byte[] header, byte[] prefix, int prefixLength);

        /** Follows {@code length} bytes; true when a frame among them is to be dropped. */
        synchronized boolean scan(byte[] bytes, int offset, int length) {
            int i = offset;
            int end = offset + length;
            while (i < end) {
                if (opaque) {
                    return false;
                }
                if (!inBody) {
                    if (headerFill == 0) {
                        headerLength = headerLength();
                    }
                    header[headerFill++] = bytes[i++];
                    if (headerFill < headerLength) {
                        continue;
                    }
                    bodyRemaining = bodyLength(header);
                    if (bodyRemaining < 0) {
                        opaque = true;
                        return false;
                    }
                    inBody = true;
                    prefixFill = 0;
                } else {
                    int take = (int) Math.min(bodyRemaining, end - i);
                    int keep = Math.min(take, PREFIX - prefixFill);
                    System.arraycopy(bytes, i, prefix, prefixFill, keep);
                    prefixFill += keep;
                    bodyRemaining -= take;
                    i += take;
                }
                if (inBody && bodyRemaining == 0) {
                    inBody = false;
                    headerFill = 0;
                    if (frame(header, prefix, prefixFill)) {
                        return true;
                    }
                }
            }
            return false;
        }
    }

    static int int32(byte[] b, int at) {
        return ((b[at] & 0xff) << 24) | ((b[at + 1] & 0xff) << 16) | ((b[at + 2] & 0xff) << 8) | (b[at + 3] & 0xff);
    }

    /** The NUL-terminated string at {@code from}, or null when the prefix ends first. */
    static String cString(byte[] b, int from, int limit) {
        for (int i = from; i < limit; i++) {
            if (b[i] == 0) {
                return new String(b, from, i - from, StandardCharsets.UTF_8);
            }
        }
        return null;
    }

    static boolean isCommit(String sql) {
        return sql != null
                && sql.strip()
                        .replaceAll(";$", "")
                        .strip()
                        .toUpperCase(Locale.ROOT)
                        .equals("COMMIT");
    }

    /** PostgreSQL protocol 3.0. */
    static final class Postgres extends WireInspector {
        private static final int SSL_REQUEST = 80877103;
        private static final int GSS_REQUEST = 80877104;
        private static final int PROTOCOL_3 = 196608;

        /** The client sends untyped startup-phase frames until its StartupMessage. */
        private boolean started;
        /** SSL/GSS requests the server has yet to answer with one byte. */
        private volatile int singleByteReplies;
        /** Prepared statements whose query is COMMIT ("" is the unnamed one). */
        private final Set<String> commitStatements = new HashSet<>();

        Postgres(Verdicts verdicts) {
            super(verdicts);
        }

        private final Side client = new Side() {
            @Override
            int headerLength() {
                return started ? 5 : 4;
            }

            @Override
            long bodyLength(byte[] h) {
                long len = started ? int32(h, 1) : int32(h, 0);
                return len < 4 ? -1 : len - 4;
            }

            @Override
            boolean frame(byte[] h, byte[] body, int n) {
                if (!started) {
                    int code = n >= 4 ? int32(body, 0) : 0;
                    if (code == SSL_REQUEST || code == GSS_REQUEST) {
                        singleByteReplies++;
                    } else if (code == PROTOCOL_3) {
                        started = true;
                    }
                    return false;
                }
                switch (h[0]) {
                    case 'Q':
                        return isCommit(cString(body, 0, n)) && verdicts.commitRequest();
                    case 'P': {
                        String name = cString(body, 0, n);
                        if (name == null) {
                            return false;
                        }
                        String query = cString(body, name.length() + 1, n);
                        synchronized (commitStatements) {
                            if (isCommit(query)) {
                                commitStatements.add(name);
                            } else {
                                commitStatements.remove(name);
                            }
                        }
                        return false;
                    }
                    case 'B': {
                        String portal = cString(body, 0, n);
                        String statement = portal == null ? null : cString(body, portal.length() + 1, n);
                        boolean commit;
                        synchronized (commitStatements) {
                            commit = statement != null && commitStatements.contains(statement);
                        }
                        return commit && verdicts.commitRequest();
                    }
                    default:
                        return false;
                }
            }
        };

        private final Side server = new Side() {
            private boolean single;

            @Override
            int headerLength() {
                single = singleByteReplies > 0;
                return single ? 1 : 5;
            }

            @Override
            long bodyLength(byte[] h) {
                if (single) {
                    return 0;
                }
                long len = int32(h, 1);
                return len < 4 ? -1 : len - 4;
            }

            @Override
            boolean frame(byte[] h, byte[] body, int n) {
                if (single) {
                    singleByteReplies--;
                    if (h[0] != 'N') {
                        opaque = true; // TLS or GSS encryption follows: nothing more to read here
                    }
                    return false;
                }
                return h[0] == 'C' && "COMMIT".equals(cString(body, 0, n)) && verdicts.commitReply();
            }
        };

        @Override
        Side client() {
            return client;
        }

        @Override
        Side server() {
            return server;
        }
    }

    /** MariaDB/MySQL client/server protocol: 3-byte length, sequence id, payload. */
    static final class MariaDb extends WireInspector {
        private static final int COM_QUERY = 0x03;
        private static final int OK = 0x00;

        /** A COMMIT was sent and its reply (the next packet with sequence id 1) has not come yet. */
        private volatile boolean commitPending;

        MariaDb(Verdicts verdicts) {
            super(verdicts);
        }

        private static long packetLength(byte[] h) {
            return (h[0] & 0xff) | ((h[1] & 0xff) << 8) | ((h[2] & 0xff) << 16);
        }

        private final Side client = new Side() {
            @Override
            int headerLength() {
                return 4;
            }

            @Override
            long bodyLength(byte[] h) {
                return packetLength(h);
            }

            @Override
            boolean frame(byte[] h, byte[] body, int n) {
                if (h[3] != 0) {
                    return false; // handshake and auth exchange; every command starts at sequence 0
                }
                boolean commit = n >= 1
                        && (body[0] & 0xff) == COM_QUERY
                        && isCommit(new String(body, 1, n - 1, StandardCharsets.UTF_8));
                commitPending = commit;
                return commit && verdicts.commitRequest();
            }
        };

        private final Side server = new Side() {
            @Override
            int headerLength() {
                return 4;
            }

            @Override
            long bodyLength(byte[] h) {
                return packetLength(h);
            }

            @Override
            boolean frame(byte[] h, byte[] body, int n) {
                if (!commitPending || h[3] != 1) {
                    return false;
                }
                commitPending = false;
                return n >= 1 && (body[0] & 0xff) == OK && verdicts.commitReply();
            }
        };

        @Override
        Side client() {
            return client;
        }

        @Override
        Side server() {
            return server;
        }
    }
}
