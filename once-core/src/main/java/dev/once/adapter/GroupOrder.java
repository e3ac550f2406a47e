package dev.once.adapter;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@linkplain AdapterDriver.Builder#inGroupOrder group order} of an {@link AdapterDriver} (FIFO
 * queues, ordering keys): each group's messages as one ordered run
 * ({@link IdempotentConsumer#processInOrder}); the acknowledged prefix is settled together, then the
 * first message that was not, alone; if that one is settled (dead-lettered) the group goes on with the
 * rest, else the rest is released. A message that cannot be decoded ends a run and is settled alone at
 * its place. Thread-safe as the driver. Not API.
 *
 * @param <M> the broker's message type
 */
final class GroupOrder<M> {

    // The driver's log category, as before group order was a class of its own: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(AdapterDriver.class);

    private final String name;
    private final IdempotentConsumer consumer;
    private final Broker<M> broker;
    private final Function<M, String> groupOf;
    /** With {@link #positionOf}, each group's stream, whose position the engine keeps; null when none is kept. */
    private final Function<String, String> streamOf;

    private final Function<M, BigInteger> positionOf;

    GroupOrder(
            String name,
            IdempotentConsumer consumer,
            Broker<M> broker,
            Function<M, String> groupOf,
            Function<String, String> streamOf,
            Function<M, BigInteger> positionOf) {
        this.name = name;
        this.consumer = consumer;
        this.broker = broker;
        this.groupOf = groupOf;
        this.streamOf = streamOf;
        this.positionOf = positionOf;
    }

    /** {@code batch} by group, each group's messages in batch order, the groups in order of first appearance. */
    Map<String, List<M>> groups(List<M> batch) {
        Map<String, List<M>> groups = new LinkedHashMap<>();
        for (M m : batch) {
            groups.computeIfAbsent(Objects.requireNonNullElse(groupOf.apply(m), ""), g -> new ArrayList<>())
                    .add(m);
        }
        return groups;
    }

    /**
     * Runs and settles every group of {@code groups}; adds to {@code released} what a stopped group
     * leaves unprocessed. False if processing threw for any run.
     */
    boolean run(Map<String, List<M>> groups, List<M> released) {
        boolean healthy = true;
        for (Map.Entry<String, List<M>> g : groups.entrySet()) {
            List<M> group = g.getValue();
            int next = 0;
            while (next < group.size()) {
                List<Processed<M>> run = new ArrayList<>();
                healthy &= processInOrder(g.getKey(), group.subList(next, group.size()), run);
                int acknowledged = 0;
                while (acknowledged < run.size() && run.get(acknowledged).verdict() == Verdict.ACKNOWLEDGE) {
                    acknowledged++;
                }
                boolean goOn = acknowledged == 0 || settledSoGroupMayGoOn(run.subList(0, acknowledged));
                if (goOn && acknowledged < run.size()) {
                    goOn = settledSoGroupMayGoOn(run.subList(acknowledged, acknowledged + 1));
                    acknowledged++;
                }
                next += acknowledged;
                if (!goOn) {
                    released.addAll(group.subList(next, group.size()));
                    break;
                }
            }
        }
        return healthy;
    }

    /**
     * Decodes {@code messages} up to the first that cannot be decoded and runs them in order;
     * fills {@code out} with their outcomes (held-back ones included), or with the undecodable
     * message alone when it comes first. False if processing threw.
     */
    private boolean processInOrder(String group, List<M> messages, List<Processed<M>> out) {
        List<Delivery> deliveries = new ArrayList<>(messages.size());
        List<BigInteger> positions = new ArrayList<>(messages.size());
        for (M m : messages) {
            try {
                BigInteger position = positionOf == null ? null : positionOf.apply(m);
                deliveries.add(broker.delivery(m));
                if (position != null) {
                    positions.add(position);
                }
            } catch (InvalidDeliveryException e) {
                if (deliveries.isEmpty()) {
                    out.add(new Processed<>(m, null, new Outcome(broker.describe(m), Status.FAILED_PERMANENT, e)));
                    return true;
                }
                break;
            }
        }
        List<Outcome> outcomes;
        boolean ok = true;
        try {
            outcomes = positionOf == null
                    ? consumer.processInOrder(deliveries)
                    : consumer.processInOrder(deliveries, new StreamPositions(streamOf.apply(group), positions));
        } catch (RuntimeException e) {
            outcomes = AdapterDriver.failedOutsideTheHandler(name, "ordered run", deliveries, e);
            ok = false;
        }
        for (int i = 0; i < deliveries.size(); i++) {
            out.add(new Processed<>(messages.get(i), deliveries.get(i), outcomes.get(i)));
        }
        return ok;
    }

    /**
     * One more run of {@code d}, decoded from {@code m}, alone: with its group's stream position when positions are
     * kept, so a message its group went on without is refused.
     */
    Outcome again(M m, Delivery d) {
        if (positionOf == null) {
            return consumer.process(d);
        }
        String group = Objects.requireNonNullElse(groupOf.apply(m), "");
        return consumer.processInOrder(
                        List.of(d), new StreamPositions(streamOf.apply(group), List.of(positionOf.apply(m))))
                .get(0);
    }

    /** Settles {@code ps}; true when all of them are gone from the queue, so their group may go on. */
    private boolean settledSoGroupMayGoOn(List<Processed<M>> ps) {
        try {
            broker.settle(ps);
        } catch (Exception e) {
            log.warn(
                    "{}: could not settle {} ({}); its group waits behind it: {}",
                    name,
                    broker.describe(ps.get(ps.size() - 1).message()),
                    ps.get(ps.size() - 1).verdict(),
                    e.toString());
            return false;
        }
        return ps.stream().noneMatch(p -> p.verdict() == Verdict.REDELIVER);
    }
}
