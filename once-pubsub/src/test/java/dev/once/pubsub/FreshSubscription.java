package dev.once.pubsub;

import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.Subscription;
import com.google.pubsub.v1.TopicName;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/** What each Pub/Sub test starts from: a fresh database, topic and subscription, deleted after the test. */
abstract class FreshSubscription {

    private final String prefix;
    private final UnaryOperator<Subscription.Builder> config;

    TestDatabase db;
    TopicName topic;
    ProjectSubscriptionName subscription;

    /** @param config shapes the subscription (ordering, exactly-once delivery) */
    FreshSubscription(String prefix, UnaryOperator<Subscription.Builder> config) {
        this.prefix = prefix;
        this.config = config;
    }

    @BeforeEach
    final void createSubscription() {
        TestPubSub.host();
        db = TestPostgres.shared().freshDatabase();
        String name = prefix + "-" + System.nanoTime();
        topic = TestPubSub.topic(name);
        subscription = TestPubSub.subscription(topic, name, config);
    }

    @AfterEach
    final void deleteSubscription() {
        if (topic != null) {
            TestPubSub.delete(topic, subscription);
        }
        if (db != null) {
            db.close();
        }
    }
}
