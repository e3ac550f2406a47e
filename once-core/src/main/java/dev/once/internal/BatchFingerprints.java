package dev.once.internal;

import dev.once.Delivery;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The fingerprints of one batch: each delivery's, in order, and each id's first occurrence's;
 * once claimed, those the inbox holds for the ids earlier transactions claimed. Not API.
 */
final class BatchFingerprints {
    final Long[] delivered;
    final Map<String, Long> firsts = new HashMap<>();
    final Set<String> withPayload = new HashSet<>();
    final Map<String, Long> stored = new HashMap<>();

    BatchFingerprints(List<Delivery> deliveries) {
        delivered = new Long[deliveries.size()];
        for (int i = 0; i < delivered.length; i++) {
            Delivery d = deliveries.get(i);
            delivered[i] = FingerprintedClaims.of(d);
            if (!firsts.containsKey(d.eventId())) {
                firsts.put(d.eventId(), delivered[i]);
            }
            if (delivered[i] != null) {
                withPayload.add(d.eventId());
            }
        }
    }
}
