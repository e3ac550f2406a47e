package dev.once.sqs;

import java.util.List;

/**
 * Lambda's partial batch response for SQS ({@code ReportBatchItemFailures}): the messages to
 * redeliver. Every other message of the batch is deleted by the event source mapping. Immutable.
 *
 * @param batchItemFailures the failed messages, by SQS message id
 */
public record SqsBatchResponse(List<BatchItemFailure> batchItemFailures) {

    public SqsBatchResponse {
        batchItemFailures = batchItemFailures == null ? List.of() : List.copyOf(batchItemFailures);
    }

    /** @param itemIdentifier the SQS message id of a message to redeliver */
    public record BatchItemFailure(String itemIdentifier) {}
}
