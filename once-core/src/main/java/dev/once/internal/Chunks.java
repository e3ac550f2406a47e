package dev.once.internal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Sorted ids cut into the parts one batch statement takes, in order (so every claim locks in one order). Not API. */
public final class Chunks {

    private Chunks() {}

    /** {@code sorted} itself when it fits in one {@code size}, else consecutive copies of at most {@code size}. */
    public static List<String[]> of(String[] sorted, int size) {
        if (sorted.length <= size) {
            return List.<String[]>of(sorted);
        }
        List<String[]> parts = new ArrayList<>();
        for (int from = 0; from < sorted.length; from += size) {
            parts.add(Arrays.copyOfRange(sorted, from, Math.min(sorted.length, from + size)));
        }
        return parts;
    }
}
