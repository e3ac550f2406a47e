package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.TypeDeclaration;
import dev.once.scan.Location;

/** An entry point found in the repository, before its flow is traced. */
final class Entry {

    /** How the messages of this entry point are acknowledged. */
    enum Ack {
        /** The container or runtime acknowledges after the handler returns. */
        AFTER_RETURN,
        /** The code acknowledges with calls (commitSync, deleteMessage, basicAck, acknowledge, ack). */
        EXPLICIT,
        /** On receipt or on a timer, whatever the handler did: auto-commit, autoAck=true, acknowledge-mode none. */
        AUTO,
        /** No acknowledgement and no redelivery (core NATS). */
        NONE
    }

    /** Dedupe the framework around the handler provides. */
    enum Framework {
        NONE,
        /** Covers every effect (Powertools @Idempotent). */
        ALL,
        /** Covers effects in the handler's database transaction (Eventuate's default detector, Axon tokens). */
        DATABASE,
        /** Present but committed apart from the effect (Camel, Spring Integration). */
        WEAK,
        /** Switched off (Eventuate's NoopDuplicateMessageDetector). */
        DISABLED
    }

    String kind;
    String broker;
    String name;
    Node decl;
    Node body;
    Location location;
    Repo.Source source;
    Ack ack = Ack.AFTER_RETURN;
    String ackText;
    /** The calls that acknowledge for an {@link Ack#EXPLICIT} consumer from the entry catalogue (complete, acknowledge). */
    java.util.Set<String> ackCalls = java.util.Set.of();

    Location ackSetting;
    /**
     * An {@link Ack#AUTO} consumer that commits Kafka offsets on a timer: what it handled since the last commit is
     * read again after a crash or rebalance, so its effects repeat as well as get lost.
     */
    boolean timerCommit;

    Framework framework = Framework.NONE;
    String frameworkText;
    Location frameworkLocation;
    boolean transactional;
    /** Where the listener container is given a Kafka transaction manager (its sends commit with the offsets), or null. */
    Location kafkaTransaction;
    /** Where a JMS listener's container joins a JTA (XA) transaction with the module's XA resources, or null. */
    Location jtaTransaction;

    /**
     * The concrete class this consumer runs as when its loop or handler is inherited from the repository's own
     * abstract consumer ({@code abstract class KafkaListener implements Runnable}, whose {@code run} polls and
     * calls the abstract {@code consume}): calls on {@code this} dispatch to this class's overrides. Null otherwise.
     */
    TypeDeclaration<?> self;

    /**
     * Where a library wrapper that commits failed records starts this consumer with no error handler, or with one that
     * only logs (the catalogue's failure lines), with why: each is reported once, on the first consumer it runs.
     */
    java.util.Map<Location, String> failedCommits = new java.util.LinkedHashMap<>();

    boolean loop;
    /** Batch size and lease in ms when both are stated, else 0. */
    long batch;

    long leaseMs;
    Location batchLocation;
    String leaseName;

    String id() {
        return location.file() + "#" + name;
    }
}
