/** Amazon SQS (standard and FIFO): a polling consumer and an outbox publisher. */
module dev.once.sqs {
    requires transitive dev.once.core;
    requires transitive software.amazon.awssdk.services.sqs;
    requires software.amazon.awssdk.core;
    requires software.amazon.awssdk.http;
    requires software.amazon.awssdk.awscore;
    requires org.slf4j;

    exports dev.once.sqs;
}
