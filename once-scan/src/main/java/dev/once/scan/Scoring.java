package dev.once.scan;

import java.util.Collection;

/**
 * The Production Reliability Index.
 *
 * <pre>
 * finding weight   w   = level factor (error 1, warning 0.5, note 0.1) × blast weight
 *                        (money 10, notification 6, data 4, message 3, cache 1; a finding with no effect
 *                        of its own takes its consumer's heaviest blast, 1 if none)
 * consumer risk    R_c = Σ w over the consumer's findings
 * consumer score   S_c = max(0, 100 − 10 × R_c)
 * consumer blast   B_c = heaviest blast weight the consumer reaches (1 if none)
 * repository index PRI = round(Σ B_c × S_c / Σ B_c)      (100 when there is no consumer)
 * </pre>
 *
 * One unguarded money effect zeroes its consumer and, weighted by blast, pulls the index down
 * far more than a cache refreshed twice. Consumers are ranked by R_c, then B_c.
 */
public final class Scoring {

    /** Points a consumer loses per unit of risk. */
    public static final double POINTS_PER_RISK = 10;

    private Scoring() {}

    /** S_c for a consumer with this risk. */
    public static int consumerScore(double risk) {
        return (int) Math.max(0, Math.round(100 - POINTS_PER_RISK * risk));
    }

    /** PRI over the consumers. */
    public static int index(Collection<Consumer> consumers) {
        double num = 0;
        double den = 0;
        for (Consumer c : consumers) {
            int b = c.blast() == null ? 1 : c.blast().weight();
            num += b * c.score();
            den += b;
        }
        return den == 0 ? 100 : (int) Math.round(num / den);
    }
}
