package dev.once;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;

/**
 * Where each delivery of an ordered run stands in the stream it was read from, for
 * {@link IdempotentConsumer#processInOrder(List, StreamPositions)}: an SQS FIFO message group and its
 * messages' sequence numbers. The engine keeps each stream's last applied position in the database and
 * moves it forward in the transaction that applies a run, so a delivery at or behind it is refused rather
 * than applied after its successors: a visibility timeout or an ack deadline is a lease without a fencing
 * token, and these positions are the token. A process that held a message past its visibility timeout
 * (cut off from the broker, not from the database) while the queue moved it on and handed out its
 * successors commits nothing out of order. Immutable.
 *
 * @param stream    names the stream, unique per consumer: 1 to {@value #MAX_STREAM_LENGTH} characters, not blank
 * @param positions one per delivery, in the run's order, each 0 or more and greater than the one before
 */
public record StreamPositions(String stream, List<BigInteger> positions) {

    /** Longest accepted stream name, in characters; the column is sized to it. */
    public static final int MAX_STREAM_LENGTH = 255;

    /**
     * The stream of an SQS FIFO queue's message group, as once's SQS integrations name it (once-sqs's consumer and
     * Lambda handler, once-spring's {@code @SqsListener} methods): {@code sqs:<queue>#<group>}, or
     * {@code sqs-sha256:<hex>} of that when longer than {@value #MAX_STREAM_LENGTH} characters. One shape, so that
     * every path applying a queue's messages under one consumer name moves the same stored position.
     *
     * @param queue          the queue as the caller names it (its URL; a Lambda event's ARN)
     * @param messageGroupId the message's {@code MessageGroupId}
     */
    public static String sqsMessageGroup(String queue, String messageGroupId) {
        String stream = "sqs:" + Objects.requireNonNull(queue, "queue") + "#"
                + Objects.requireNonNull(messageGroupId, "messageGroupId");
        if (stream.length() <= MAX_STREAM_LENGTH) {
            return stream;
        }
        try {
            return "sqs-sha256:"
                    + HexFormat.of()
                            .formatHex(MessageDigest.getInstance("SHA-256")
                                    .digest(stream.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    /**
     * An SQS FIFO message's {@code SequenceNumber}, its position in its message group.
     *
     * @param messageId the SQS message id, for the error
     * @throws InvalidDeliveryException when it is missing or not a decimal number (not a FIFO queue's message)
     */
    public static BigInteger sqsSequenceNumber(String messageId, String sequenceNumber) {
        try {
            return new BigInteger(Objects.requireNonNull(sequenceNumber));
        } catch (NullPointerException | NumberFormatException e) {
            throw new InvalidDeliveryException("SQS message " + messageId + " has SequenceNumber '" + sequenceNumber
                    + "': a FIFO queue's message has a decimal sequence number");
        }
    }

    /** @throws IllegalArgumentException naming the bad stream name or position and what is expected */
    public StreamPositions {
        Objects.requireNonNull(stream, "stream");
        if (stream.isBlank() || stream.length() > MAX_STREAM_LENGTH) {
            throw new IllegalArgumentException("stream must be 1 to " + MAX_STREAM_LENGTH
                    + " characters and not blank, but was '" + stream + "' (" + stream.length() + " characters)");
        }
        positions = List.copyOf(positions); // rejects null positions
        for (int i = 0; i < positions.size(); i++) {
            BigInteger p = positions.get(i);
            if (p.signum() < 0 || (i > 0 && p.compareTo(positions.get(i - 1)) <= 0)) {
                throw new IllegalArgumentException("positions of stream '" + stream
                        + "' must be 0 or more and increase along the run, but position " + i + " is " + p
                        + (i > 0 ? " after " + positions.get(i - 1) : ""));
            }
        }
    }
}
