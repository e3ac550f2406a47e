package dev.once.internal;

/**
 * Which of the two claim forms a delivery in a transaction of its own is sent with: the plain insert
 * ({@link AllNewClaims#claim}), cheapest for a new id, or the {@code ON CONFLICT} claim
 * ({@link dev.once.Inbox#claim}), cheapest for a copy. Both are exact: this picks a cost, never an
 * answer. A copy the plain insert meets fails with a unique violation, and building that exception
 * costs the driver more than the copy's whole transaction otherwise does (pgjdbc: 220 against 89 µs
 * of client CPU and 6,900 against 1,800 bytes); {@code ON CONFLICT} costs every new id three more
 * index buffers and a WAL record. So a delivery is expected to be a copy when
 * <ul>
 *   <li>its id was claimed or seen here recently: copies from a producer's retries follow their
 *       original a few records later; the last ids are remembered by hash in a fixed table, one slot
 *       per hash, so memory is bounded and a collision only forgets;</li>
 *   <li>or copies this table did not predict were met recently (a redelivered range after another
 *       process's crash or a rebalance): each raises a pressure that every claim then lowers by one,
 *       and the {@code ON CONFLICT} form is used while it is above zero. One such copy buys {@link
 *       #PRESSURE_PER_COPY} claims, about what one unique violation costs against one new id's
 *       {@code ON CONFLICT}, so the form stays on while unpredicted copies arrive at least that often.</li>
 * </ul>
 * Shared by the threads of one consumer without locks: the fields are read and written racily, which
 * can only pick the dearer form for a delivery, not change what it reports. Not API.
 */
final class CopyHint {

    /** Ids remembered, one slot per hash (a power of two): copies a few hundred deliveries later are still found. */
    static final int SLOTS = 4096;

    /** Claims in the {@code ON CONFLICT} form bought by one copy that the remembered ids did not predict. */
    static final int PRESSURE_PER_COPY = 10;

    private static final int MAX_PRESSURE = 100 * PRESSURE_PER_COPY;

    private final int[] recent = new int[SLOTS];
    private int pressure;

    /** True when {@code eventId} is better claimed in the {@code ON CONFLICT} form. */
    boolean likelyCopy(String eventId) {
        int p = pressure;
        if (p > 0) {
            pressure = p - 1;
            return true;
        }
        return remembered(eventId);
    }

    /**
     * Records one claim's answer: the id is remembered; a copy that was not remembered (whichever form
     * met it) raises the pressure.
     */
    void claimed(String eventId, boolean copy) {
        int h = eventId.hashCode();
        int slot = slot(h);
        if (copy && recent[slot] != h) {
            pressure = Math.min(pressure + PRESSURE_PER_COPY, MAX_PRESSURE);
        }
        recent[slot] = h;
    }

    private boolean remembered(String eventId) {
        int h = eventId.hashCode();
        return recent[slot(h)] == h;
    }

    private static int slot(int hash) {
        return (hash ^ (hash >>> 16)) & (SLOTS - 1);
    }
}
