package dev.once.outbox;

import dev.once.OnceException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * How a relay sends one locked batch and what each send ended with: through {@link
 * Publisher#publishAll} all at once when the publisher overrides it, else send by send; every wait
 * bounded by the send timeout, the lease kept between waits in exclusive mode. Marking the rows
 * (sent, retry, dead) is the relay's.
 */
final class RelaySends {
    private final String name;
    private final Publisher publisher;
    private final Duration sendTimeout;
    private final long leaseSlice;
    private final boolean concurrent;

    RelaySends(String name, Publisher publisher, Duration sendTimeout, Duration leaseSlice) {
        this.name = name;
        this.publisher = publisher;
        this.sendTimeout = sendTimeout;
        this.leaseSlice = leaseSlice.toNanos();
        this.concurrent = overridesPublishAll(publisher);
    }

    /**
     * Sends {@code rows}, adding each to {@code attempted} before its send; one attempt per row, in
     * order, null for a row not sent: its key's row before it in the batch failed, or the batch's
     * send timeout was spent before its turn.
     */
    List<Attempt> send(List<OutboxMessage> rows, HeldLease held, List<OutboxMessage> attempted) {
        // The batch holds a run of rows per key (OutboxRepository#lockBatch), so it goes in waves:
        // the first holds each key's first row and the rows without a key, the n-th the n-th row
        // of each key whose row before it was accepted. No wave holds two rows of a key, so its sends
        // may overlap without reordering any key; a failed or hung row stops its key for the batch.
        List<Integer> unkeyed = new ArrayList<>();
        Map<String, List<Integer>> runs = new HashMap<>(); // each key's rows, in id order
        int waves = 0;
        for (int i = 0; i < rows.size(); i++) {
            String key = rows.get(i).key();
            if (key == null) {
                unkeyed.add(i);
                waves = Math.max(waves, 1);
            } else {
                List<Integer> run = runs.computeIfAbsent(key, k -> new ArrayList<>());
                run.add(i);
                waves = Math.max(waves, run.size());
            }
        }
        runs.values()
                .forEach(run ->
                        run.sort(Comparator.comparingLong(i -> rows.get(i).id())));
        Attempt[] attempts = new Attempt[rows.size()];
        long deadline = System.nanoTime() + sendTimeout.toNanos();
        for (int w = 0; w < waves; w++) {
            List<Integer> due = new ArrayList<>(w == 0 ? unkeyed : List.of());
            for (List<Integer> run : runs.values()) {
                if (run.size() > w && (w == 0 || accepted(attempts[run.get(w - 1)]))) {
                    due.add(run.get(w));
                }
            }
            if (due.isEmpty() || (w > 0 && System.nanoTime() - deadline >= 0)) {
                break;
            }
            due.sort(null); // the batch's order (oldest available first) within a wave
            List<OutboxMessage> wave = due.stream().map(rows::get).toList();
            List<Attempt> sent =
                    concurrent ? sendAll(wave, held, attempted, deadline) : sendEach(wave, held, attempted);
            for (int j = 0; j < due.size(); j++) {
                attempts[due.get(j)] = sent.get(j);
            }
        }
        return Arrays.asList(attempts);
    }

    // Sent, and its key's next row may follow (null: not sent, its key's row before it was not accepted).
    private static boolean accepted(Attempt a) {
        return a != null && a.failure() == null;
    }

    /**
     * The path for a publisher that sends one message at a time ({@link Publisher#publishAll} not
     * overridden): send by send, renewing the lease and checking for an interruption before each.
     */
    private List<Attempt> sendEach(List<OutboxMessage> rows, HeldLease held, List<OutboxMessage> attempted) {
        List<Attempt> attempts = new ArrayList<>(rows.size());
        for (OutboxMessage m : rows) {
            interrupted();
            held.keep();
            attempted.add(m);
            CompletionStage<Receipt> stage = publisher.publishAll(List.of(m)).get(0);
            attempts.add(await(m, stage, System.nanoTime() + sendTimeout.toNanos(), held));
        }
        return attempts;
    }

    /** Stops the batch (it rolls back) when the relay's thread was interrupted. */
    void interrupted() {
        if (Thread.currentThread().isInterrupted()) {
            throw new OnceException("relay " + name + " interrupted; batch rolled back, its rows will be sent again");
        }
    }

    /** What a send ended with: the destination's receipt, or the failure and whether it is permanent. */
    record Attempt(Receipt receipt, Throwable failure, boolean permanent) {

        static Attempt of(Throwable failure) {
            return failure instanceof PublishFailure f
                    ? new Attempt(f.receipt(), f, !f.retryable())
                    : new Attempt(null, failure, false);
        }
    }

    /**
     * Sends a wave through {@link Publisher#publishAll} and waits for every stage, all of them
     * within the batch's send timeout ({@code deadline}): a stage still open then counts as a
     * retryable failure (and is cancelled), so one hung send delays its batch, never blocks it.
     */
    private List<Attempt> sendAll(
            List<OutboxMessage> rows, HeldLease held, List<OutboxMessage> attempted, long deadline) {
        interrupted();
        held.keep();
        attempted.addAll(rows);
        List<? extends CompletionStage<Receipt>> stages;
        try {
            stages = publisher.publishAll(List.copyOf(rows));
        } catch (RuntimeException e) {
            return rows.stream().map(m -> Attempt.of(e)).toList();
        }
        if (stages == null || stages.size() != rows.size()) {
            IllegalStateException e = new IllegalStateException("publisher " + publisher + " answered "
                    + (stages == null ? "null" : stages.size() + " results") + " for " + rows.size()
                    + " messages; Publisher.publishAll must return one per message");
            return rows.stream().map(m -> Attempt.of(e)).toList();
        }
        List<Attempt> attempts = new ArrayList<>(rows.size());
        for (int i = 0; i < rows.size(); i++) {
            attempts.add(await(rows.get(i), stages.get(i), deadline, held));
        }
        return attempts;
    }

    // In exclusive mode the wait goes in slices, the lease renewed between them, so a batch that
    // outlasts half the lease keeps it.
    private Attempt await(OutboxMessage m, CompletionStage<Receipt> stage, long deadline, HeldLease held) {
        if (stage == null) {
            return Attempt.of(new IllegalStateException("publisher " + publisher + " answered null for row " + m.id()));
        }
        CompletableFuture<Receipt> f = stage.toCompletableFuture();
        try {
            while (held.lease() != null && !f.isDone() && deadline - System.nanoTime() > leaseSlice) {
                try {
                    f.get(leaseSlice, TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    held.keep();
                }
            }
            Receipt receipt = f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            return new Attempt(receipt == null ? Receipt.NONE : receipt, null, false);
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (cause instanceof CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            return Attempt.of(cause);
        } catch (TimeoutException e) {
            f.cancel(true);
            return Attempt.of(PublishFailure.retryable(
                    "relay " + name + ": no answer for row " + m.id() + " (event " + m.eventId() + ") within the send"
                            + " timeout " + sendTimeout + "; it may or may not have been sent",
                    Receipt.NONE,
                    e));
        } catch (CancellationException e) {
            return Attempt.of(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Attempt.of(e);
        }
    }

    // A publisher that keeps the sequential default is driven send by send (see sendEach).
    private static boolean overridesPublishAll(Publisher p) {
        try {
            return p.getClass().getMethod("publishAll", List.class).getDeclaringClass() != Publisher.class;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }
}
