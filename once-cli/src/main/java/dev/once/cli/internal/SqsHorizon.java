package dev.once.cli.internal;

import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.SqsClientBuilder;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * How late SQS can deliver a message again, against the inbox retention. A message lives
 * {@code MessageRetentionPeriod} in its queue. With a redrive policy it may then sit in the
 * dead-letter queue: on a standard queue until its original enqueue time plus the dead-letter
 * queue's retention (the enqueue time is kept), on a FIFO queue the dead-letter queue's whole
 * retention (it is reset). A redrive back to the queue (StartMessageMoveTask) makes it a new
 * message that lives the queue's retention again. A delivery later than the inbox retention finds
 * its claim pruned and is applied again; the doctor says which setting to change when that can happen.
 */
public final class SqsHorizon {

    /** One finding: OK or WARN and what it says. */
    public record Finding(boolean ok, String text) {}

    private static final Pattern DEAD_LETTER_ARN = Pattern.compile("\"deadLetterTargetArn\"\\s*:\\s*\"([^\"]+)\"");
    private static final Pattern MAX_RECEIVE_COUNT = Pattern.compile("\"maxReceiveCount\"\\s*:\\s*\"?(\\d+)");

    /**
     * What is assumed for a queue whose endpoint reports no {@code MessageRetentionPeriod} (ElasticMQ
     * keeps messages until they are deleted): SQS's maximum, so the check errs towards a warning.
     */
    static final Duration ASSUMED_RETENTION = Duration.ofDays(14);

    private SqsHorizon() {}

    /**
     * The latest a message can be delivered after it was sent: the queue's retention, or with a
     * dead-letter queue, its time there (standard: until the original enqueue time plus the
     * dead-letter queue's retention; FIFO: the move resets it) plus the queue's retention again after a redrive.
     */
    public static Duration horizon(Duration queue, boolean fifo, Duration deadLetterQueue) {
        if (deadLetterQueue == null) {
            return queue;
        }
        return deadLettered(queue, fifo, deadLetterQueue).plus(queue);
    }

    private static Duration deadLettered(Duration queue, boolean fifo, Duration deadLetterQueue) {
        // the latest a redrive can take it back: standard, the dead-letter queue counts from the
        // original enqueue time; FIFO, from the move, which comes at the latest when the queue's retention ends
        return fifo ? queue.plus(deadLetterQueue) : deadLetterQueue;
    }

    private static Duration retention(Map<QueueAttributeName, String> attributes) {
        String s = attributes.get(QueueAttributeName.MESSAGE_RETENTION_PERIOD);
        return s == null ? null : Duration.ofSeconds(Long.parseLong(s));
    }

    private static String describe(Duration reported) {
        return reported == null
                ? Durations.format(ASSUMED_RETENTION) + " (assumed, SQS's maximum: the endpoint reports no"
                        + " MessageRetentionPeriod)"
                : Durations.format(reported);
    }

    /**
     * Reads each queue's retention and redrive policy (and its dead-letter queue's retention) and
     * compares the latest redelivery with {@code inboxRetention}; {@code endpoint} null for the
     * SDK's own (region and credentials from the SDK's default chain).
     */
    public static List<Finding> check(String endpoint, Collection<String> queueUrls, Duration inboxRetention) {
        SqsClientBuilder builder = SqsClient.builder();
        if (endpoint != null) {
            builder.endpointOverride(URI.create(endpoint));
        }
        List<Finding> findings = new ArrayList<>();
        try (SqsClient sqs = builder.build()) {
            for (String url : queueUrls) {
                findings.add(check(sqs, url, inboxRetention));
            }
        }
        return findings;
    }

    private static Finding check(SqsClient sqs, String url, Duration inbox) {
        Map<QueueAttributeName, String> a = sqs.getQueueAttributes(r -> r.queueUrl(url)
                        .attributeNames(
                                QueueAttributeName.MESSAGE_RETENTION_PERIOD,
                                QueueAttributeName.REDRIVE_POLICY,
                                QueueAttributeName.FIFO_QUEUE))
                .attributes();
        Duration reported = retention(a);
        Duration kept = reported == null ? ASSUMED_RETENTION : reported;
        boolean fifo = Boolean.parseBoolean(a.get(QueueAttributeName.FIFO_QUEUE));
        String redrive = a.get(QueueAttributeName.REDRIVE_POLICY);
        Matcher arn = redrive == null ? null : DEAD_LETTER_ARN.matcher(redrive);
        String name = url.substring(url.lastIndexOf('/') + 1);
        if (arn == null || !arn.find()) {
            String text = "queue " + name + " keeps messages "
                    + (reported == null ? describe(null) : Durations.format(kept) + " (MessageRetentionPeriod)")
                    + ", no redrive policy";
            return kept.compareTo(inbox) < 0
                    ? new Finding(true, text + ": less than the inbox retention of " + Durations.format(inbox))
                    : new Finding(
                            false,
                            text + ": not less than the inbox retention of " + Durations.format(inbox)
                                    + "; a message redelivered after its claim was pruned is applied again: make the inbox"
                                    + " retention (InboxPruner, --retention) longer than " + Durations.format(kept)
                                    + ", or shorten MessageRetentionPeriod of " + name);
        }
        String dlqArn = arn.group(1);
        String[] parts = dlqArn.split(":");
        String dlqName = parts[parts.length - 1];
        String dlqUrl = sqs.getQueueUrl(r -> {
                    r.queueName(dlqName);
                    if (parts.length == 6 && !parts[4].isEmpty()) {
                        r.queueOwnerAWSAccountId(parts[4]);
                    }
                })
                .queueUrl();
        Duration dlqReported = retention(sqs.getQueueAttributes(
                        r -> r.queueUrl(dlqUrl).attributeNames(QueueAttributeName.MESSAGE_RETENTION_PERIOD))
                .attributes());
        Duration dlqKept = dlqReported == null ? ASSUMED_RETENTION : dlqReported;
        Matcher count = MAX_RECEIVE_COUNT.matcher(redrive);
        Duration inDeadLetters = deadLettered(kept, fifo, dlqKept);
        Duration horizon = horizon(kept, fifo, dlqKept);
        String text = "queue " + name + " keeps messages " + describe(reported) + ", its dead-letter queue "
                + dlqName + " " + describe(dlqReported)
                + (count.find() ? " (maxReceiveCount " + count.group(1) + ")" : "") + ": a message redriven just"
                + " before it expires there (" + Durations.format(inDeadLetters) + " after it was sent"
                + (fifo ? ", FIFO: the dead-letter queue's retention starts at the move" : "")
                + ") can be delivered up to " + Durations.format(horizon) + " after it was sent";
        if (horizon.compareTo(inbox) < 0) {
            return new Finding(true, text + ", less than the inbox retention of " + Durations.format(inbox));
        }
        return new Finding(
                false,
                text + ", not less than the inbox retention of " + Durations.format(inbox)
                        + ": a message applied, then redriven after its claim was pruned, is applied again; make the"
                        + " inbox retention (InboxPruner, --retention) longer than " + Durations.format(horizon)
                        + ", or shorten the retention of " + dlqName + " or " + name
                        + ", or redrive only messages younger than the inbox retention");
    }
}
