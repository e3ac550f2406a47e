package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Receipt;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import software.amazon.awssdk.services.sqs.model.Message;

/**
 * What {@link SqsPublisher#publishAll} sends of each row: its body as the text its UTF-8 payload is,
 * ASCII or not, with its event id attribute; and the bytes it counts for a request's limit, never
 * fewer than the UTF-8 encoding has (a count below it would fill a request past SQS's 256 KiB).
 */
class SqsPublisherBodyTest {

    @Property(tries = 300)
    void theBytesCountedOfAnAttributeAreNeverFewerThanItsUtf8Encoding(@ForAll("texts") String s) {
        long encoded = s.getBytes(StandardCharsets.UTF_8).length;
        long counted = SqsPublisher.utf8Length(s);
        assertThat(counted)
                .as("counted for %s", s.codePoints().boxed().toList())
                .isGreaterThanOrEqualTo(encoded);
        if (wellFormed(s)) {
            assertThat(counted).as("a well-formed string's exact length").isEqualTo(encoded);
        }
    }

    @Property(tries = 5)
    void everyBodyArrivesAsTheTextOfItsPayload(@ForAll("batches") List<String> bodies) throws Exception {
        String queue = TestSqs.createQueue("bodies-" + System.nanoTime(), 30);
        try {
            List<OutboxMessage> rows = new ArrayList<>();
            for (int i = 0; i < bodies.size(); i++) {
                rows.add(TestSqs.message(queue, "evt-" + i, null, bodies.get(i)));
            }
            for (CompletionStage<Receipt> stage : new SqsPublisher(TestSqs.client()).publishAll(rows)) {
                assertThat(stage.toCompletableFuture().get(30, TimeUnit.SECONDS).body())
                        .startsWith("messageId=");
            }
            Map<String, String> received = new TreeMap<>();
            while (received.size() < bodies.size()) {
                for (Message m : TestSqs.client()
                        .receiveMessage(r -> r.queueUrl(queue)
                                .maxNumberOfMessages(10)
                                .waitTimeSeconds(1)
                                .messageAttributeNames("All"))
                        .messages()) {
                    received.put(
                            m.messageAttributes()
                                    .get(OutboxMessage.EVENT_ID_HEADER)
                                    .stringValue(),
                            m.body());
                }
            }
            Map<String, String> sent = new TreeMap<>();
            for (int i = 0; i < bodies.size(); i++) {
                sent.put("evt-" + i, bodies.get(i));
            }
            assertThat(received).isEqualTo(sent);
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    @Provide
    Arbitrary<String> texts() {
        // ASCII, two- and three-byte characters, pairs and lone surrogates
        return Arbitraries.strings()
                .withCharRange((char) 0, (char) 0x7f)
                .withCharRange((char) 0x80, (char) 0x7ff)
                .withCharRange((char) 0x800, (char) 0xd7ff)
                .withCharRange((char) 0xd800, (char) 0xdfff)
                .withCharRange((char) 0xe000, (char) 0xffff)
                .ofMaxLength(40);
    }

    @Provide
    Arbitrary<List<String>> batches() {
        // what SQS takes as a body: no control characters but tab and line breaks, no surrogates alone
        Arbitrary<String> body = Arbitraries.strings()
                .withCharRange(' ', '~')
                .withCharRange('\u00a0', '\u07ff')
                .withCharRange('\u0800', '\ud7ff')
                .withChars('\t', '\n', '\u20ac')
                .ofMinLength(1)
                .ofMaxLength(30);
        return body.list().ofMinSize(1).ofMaxSize(25);
    }

    private static boolean wellFormed(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return false;
            }
        }
        return true;
    }
}
