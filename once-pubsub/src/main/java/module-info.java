/**
 * Google Cloud Pub/Sub: a streaming-pull consumer that acknowledges after commit, and an outbox
 * publisher. Google's client jars carry no module name: they are required by the names Java derives
 * from their file names.
 */
module dev.once.pubsub {
    requires transitive dev.once.core;
    requires transitive google.cloud.pubsub;
    requires transitive gax;
    requires transitive com.google.api.apicommon;
    requires transitive proto.google.cloud.pubsub.v1;
    requires com.google.protobuf;
    requires com.google.common;
    requires org.slf4j;

    exports dev.once.pubsub;
}
