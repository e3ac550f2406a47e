package dev.once.spring;

import dev.once.Delivery;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.StreamPositions;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.util.ClassUtils;

/**
 * Turns the message argument of a listener method (Kafka {@code ConsumerRecord}, Spring messaging
 * {@code Message}, AMQP {@code Message}, Spring Cloud GCP's {@code BasicAcknowledgeablePubsubMessage}, the Spring
 * {@code Message} of a Spring Cloud AWS {@code @SqsListener}) into a {@link Delivery}. Each broker library is optional: its
 * branch is used only when its classes are on the class path.
 */
final class ListenerMessages {

    private static final ClassLoader LOADER = ListenerMessages.class.getClassLoader();
    static final boolean KAFKA = ClassUtils.isPresent("org.apache.kafka.clients.consumer.ConsumerRecord", LOADER);
    static final boolean MESSAGING = ClassUtils.isPresent("org.springframework.messaging.Message", LOADER);
    static final boolean AMQP = ClassUtils.isPresent("org.springframework.amqp.core.Message", LOADER);
    static final boolean SPRING_KAFKA =
            ClassUtils.isPresent("org.springframework.kafka.support.Acknowledgment", LOADER);
    static final boolean RABBIT_CLIENT = ClassUtils.isPresent("com.rabbitmq.client.Channel", LOADER);
    static final boolean SPRING_RABBIT =
            ClassUtils.isPresent("org.springframework.amqp.rabbit.annotation.RabbitListener", LOADER);
    static final boolean SPRING_PUBSUB =
            ClassUtils.isPresent("com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage", LOADER);
    // a PubSubMessageSource's AcknowledgmentCallback (AfterCommitPubSub settles polled messages through it)
    static final boolean SPRING_INTEGRATION =
            ClassUtils.isPresent("org.springframework.integration.acks.AcknowledgmentCallback", LOADER);
    static final boolean SPRING_SQS =
            ClassUtils.isPresent("io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement", LOADER);

    private ListenerMessages() {}

    /** True when values of {@code type} are messages this class reads headers from. */
    static boolean isMessage(Class<?> type) {
        return (KAFKA && Kafka.isRecord(type))
                || (MESSAGING && Messaging.isMessage(type))
                || (AMQP && Amqp.isMessage(type))
                || isPubSub(type);
    }

    /** True when {@code type} is Spring Cloud GCP's acknowledgeable Pub/Sub message (or a converted one). */
    static boolean isPubSub(Class<?> type) {
        return SPRING_PUBSUB && type != null && PubSub.isMessage(type);
    }

    /**
     * The acknowledgeable Pub/Sub message behind {@code message}: itself, or the
     * {@code gcp_pubsub_original_message} header a {@code PubSubInboundChannelAdapter} puts on the Spring
     * {@code Message} it sends; null for anything else.
     */
    static Object pubSubHandle(Object message) {
        if (!SPRING_PUBSUB || message == null) {
            return null;
        }
        if (PubSub.isMessage(message.getClass())) {
            return message;
        }
        return MESSAGING && Messaging.isMessage(message.getClass()) ? PubSub.original(message) : null;
    }

    /** True when {@code type} is Spring Cloud AWS's SQS {@code Acknowledgement} (a MANUAL listener's argument). */
    static boolean isSqsAcknowledgement(Class<?> type) {
        return SPRING_SQS && Sqs.isAcknowledgement(type);
    }

    /** True when {@code type} is Spring Cloud AWS's {@code BatchAcknowledgement} (a batch listener's argument). */
    static boolean isSqsBatchAcknowledgement(Class<?> type) {
        return SPRING_SQS && Sqs.isBatchAcknowledgement(type);
    }

    /** True when {@code message} is a Spring {@code Message} a Spring Cloud AWS SQS container (or template) made. */
    static boolean isSqs(Object message) {
        return MESSAGING
                && message instanceof org.springframework.messaging.Message<?> m
                && m.getHeaders().containsKey(Sqs.RECEIPT_HANDLE);
    }

    /**
     * True when a Spring Cloud AWS SQS container left the delete of {@code message} to the listener: it carries the
     * {@code AcknowledgementCallback} header, which the container's message source puts on the messages it converts
     * in {@code AcknowledgementMode.MANUAL} only ({@code AbstractMessageConvertingMessageSource
     * .setupAcknowledgementForConversion}), wherever the mode was set (the annotation, a placeholder, the container
     * factory's options, a container customizer); without it the container deletes the message itself. The header's
     * name is a compile-time constant: reading it loads no Spring Cloud AWS class.
     */
    static boolean deletedByListener(Object message) {
        return MESSAGING
                && message instanceof org.springframework.messaging.Message<?> m
                && m.getHeaders().containsKey(Sqs.ACKNOWLEDGEMENT_CALLBACK);
    }

    /** True when {@code type} is the RabbitMQ {@code Channel} a MANUAL-ack listener acknowledges on. */
    static boolean isChannel(Class<?> type) {
        return RABBIT_CLIENT && type == com.rabbitmq.client.Channel.class;
    }

    /** True when a delivery tag can be read from values of {@code type} (an AMQP or a messaging {@code Message}). */
    static boolean carriesDeliveryTag(Class<?> type) {
        return (AMQP && Amqp.isMessage(type)) || (MESSAGING && Messaging.isMessage(type));
    }

    /** The RabbitMQ delivery tag of a message for which {@link #carriesDeliveryTag} holds. */
    static long deliveryTag(Object message) {
        if (AMQP && Amqp.isMessage(message.getClass())) {
            return ((org.springframework.amqp.core.Message) message)
                    .getMessageProperties()
                    .getDeliveryTag();
        }
        Object tag = ((org.springframework.messaging.Message<?>) message)
                .getHeaders()
                .get("amqp_deliveryTag");
        if (tag instanceof Number n) {
            return n.longValue();
        }
        throw new InvalidDeliveryException(
                "the message has no amqp_deliveryTag header: is it from a RabbitMQ listener?");
    }

    /**
     * The queue a RabbitMQ listener container consumed {@code message} (an AMQP or a messaging {@code Message}) from,
     * or null for anything else.
     */
    static String rabbitQueue(Object message) {
        if (AMQP && message instanceof org.springframework.amqp.core.Message m) {
            return m.getMessageProperties().getConsumerQueue();
        }
        return MESSAGING && message instanceof org.springframework.messaging.Message<?> m
                ? text(m.getHeaders().get("amqp_consumerQueue"))
                : null;
    }

    /**
     * @param eventId the event id from the listener's SpEL expression, or null to read {@code header}
     * @throws InvalidDeliveryException if the message carries no usable event id
     */
    static Delivery delivery(Object message, String header, String eventId) {
        if (KAFKA && Kafka.isRecord(message.getClass())) {
            return Kafka.delivery(message, header, eventId);
        }
        if (AMQP && Amqp.isMessage(message.getClass())) {
            return Amqp.delivery(message, header, eventId);
        }
        if (isPubSub(message.getClass())) {
            return PubSub.delivery(message, header, eventId);
        }
        if (MESSAGING && Messaging.isMessage(message.getClass())) {
            return Messaging.delivery(message, header, eventId);
        }
        if (eventId != null) {
            return Delivery.builder(eventId).payload(bytes(message)).build();
        }
        throw new InvalidDeliveryException("cannot read header '" + header + "' from a "
                + message.getClass().getName()
                + ": pass a ConsumerRecord or Message argument, or set @IdempotentListener(eventId = \"<SpEL>\")");
    }

    /**
     * Where {@code message}, the Spring {@code Message} of a Spring Cloud AWS SQS container, stands in its FIFO queue:
     * its message group's stream ({@link StreamPositions#sqsMessageGroup}, keyed by the queue's URL as once-sqs's
     * consumer keys it) and its {@code SequenceNumber}. Null for any other message, a standard queue's included
     * (a standard queue may carry message groups too, without order or sequence numbers): processed without a
     * position. The queue is FIFO by its name, which SQS makes end in {@code .fifo}.
     *
     * @throws InvalidConfigurationException (the reason, for the caller to name the listener) when a FIFO queue's
     *     message lacks the group or the sequence number: its container did not ask SQS for them
     * @throws InvalidDeliveryException when the sequence number is not a number
     */
    static StreamPositions sqsFifoPosition(Object message) {
        if (!isSqs(message)) {
            return null;
        }
        var headers = ((org.springframework.messaging.Message<?>) message).getHeaders();
        Object queue = headers.get(Sqs.QUEUE);
        if (!(queue instanceof String name) || !name.endsWith(".fifo")) {
            return null;
        }
        Object group = headers.get(Sqs.GROUP);
        Object sequence = headers.get(Sqs.SEQUENCE_NUMBER);
        Object raw = headers.get(Sqs.RAW_MESSAGE_ID);
        String messageId = raw != null ? raw.toString() : String.valueOf(headers.getId());
        if (group == null || sequence == null) {
            throw new InvalidConfigurationException("got SQS message " + messageId + " from FIFO queue " + name
                    + " without its " + (group == null ? "MessageGroupId" : "SequenceNumber") + " (header '"
                    + (group == null ? Sqs.GROUP : Sqs.SEQUENCE_NUMBER) + "'): its listener container does not"
                    + " request that message system attribute, by which once keeps the message group's position (a"
                    + " message held past its visibility timeout while SQS handed out its successors must not be"
                    + " applied after them); refused, the message comes back after its visibility timeout. Leave the"
                    + " container factory's messageSystemAttributeNames at their default (All), or add"
                    + " MessageSystemAttributeName.MESSAGE_GROUP_ID and SEQUENCE_NUMBER to them");
        }
        Object url = headers.get(Sqs.QUEUE_URL);
        return new StreamPositions(
                StreamPositions.sqsMessageGroup(url != null ? url.toString() : name, group.toString()),
                java.util.List.of(StreamPositions.sqsSequenceNumber(messageId, sequence.toString())));
    }

    static String text(Object value) {
        if (value == null) {
            return null;
        }
        if (value instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        return value.toString();
    }

    /**
     * The payload the engine fingerprints: raw bytes or text only. A deserialized object has no
     * stable byte form here (its {@code toString} may be {@code Object}'s identity hash, different on
     * every redelivery, which would report each copy as a payload mismatch), so it gets none: a
     * delivery without a payload is never a mismatch.
     */
    static byte[] bytes(Object value) {
        if (value instanceof byte[] b) {
            return b;
        }
        if (value instanceof CharSequence text) {
            return text.toString().getBytes(StandardCharsets.UTF_8);
        }
        return new byte[0];
    }

    /**
     * A delivery of {@code body} as the listener receives it. A text body is encoded here, into an array no one
     * else holds, and handed over (Delivery's own copy of it would be a second); an array body is the client's,
     * which the listener is handed too, so Delivery copies it.
     */
    private static Delivery delivery(
            String id, Object body, Map<String, String> headers, int attempt, boolean redelivered, String where) {
        return body instanceof byte[] array
                ? new Delivery(id, "", array, headers, attempt, redelivered, where)
                : Delivery.handingOver(id, "", bytes(body), headers, attempt, redelivered, where);
    }

    static String required(String id, String header, String where) {
        if (id == null) {
            throw new InvalidDeliveryException("no event id: header '" + header + "' is missing on " + where
                    + "; the producer must stamp a stable event id on every message (or set"
                    + " @IdempotentListener(eventId = \"<SpEL>\"))");
        }
        return id;
    }

    private static final class Kafka {
        // A compile-time constant, inlined: reading it loads no spring-kafka class.
        private static final String DELIVERY_ATTEMPT = org.springframework.kafka.support.KafkaHeaders.DELIVERY_ATTEMPT;

        static boolean isRecord(Class<?> type) {
            return org.apache.kafka.clients.consumer.ConsumerRecord.class.isAssignableFrom(type);
        }

        static Delivery delivery(Object message, String header, String eventId) {
            var record = (org.apache.kafka.clients.consumer.ConsumerRecord<?, ?>) message;
            // One pass over the headers (every record of a per-record listener comes through here): their
            // entries, and the last value of the event id's header and of spring-kafka's delivery attempt. The
            // entries become the immutable map Delivery keeps as it is (Map.copyOf of an immutable map copies
            // nothing), not a HashMap that Delivery would copy again.
            org.apache.kafka.common.header.Header[] all = record.headers().toArray();
            // keys at even, values at odd places: one array, not an entry object per header; none for a record
            // with one header (the event id's, as most carry), whose map is made from it directly
            String[] pairs = all.length > 1 ? new String[2 * all.length] : null;
            int n = 0;
            String last = null;
            byte[] deliveryAttempt = null;
            Map<String, String> headers = Map.of();
            for (var h : all) {
                String key = h.key();
                byte[] value = h.value();
                String text = value == null ? null : new String(value, StandardCharsets.UTF_8);
                if (pairs == null) {
                    headers = Map.of(key, text == null ? "" : text);
                } else {
                    int same = all.length <= SMALL ? indexOf(pairs, n, key) : -1;
                    int at = same >= 0 ? same : n++; // a repeated key: its last value, as Kafka's lastHeader reads it
                    pairs[2 * at] = key;
                    pairs[2 * at + 1] = text == null ? "" : text;
                }
                if (key.equals(header)) {
                    last = text; // the event id, decoded once for the headers and the id
                } else if (SPRING_KAFKA && key.equals(DELIVERY_ATTEMPT)) {
                    deliveryAttempt = value;
                }
            }
            if (pairs != null) {
                headers = all.length <= SMALL ? immutable(pairs, n) : lastOfEach(pairs, n);
            }
            String where = "kafka:" + record.topic() + "/" + record.partition() + "@" + record.offset();
            String id = eventId != null ? eventId : last;
            int attempt = 1;
            if (deliveryAttempt != null && deliveryAttempt.length == 4) {
                attempt = Math.max(1, java.nio.ByteBuffer.wrap(deliveryAttempt).getInt());
            }
            return ListenerMessages.delivery(
                    required(id, header, where), record.value(), headers, attempt, attempt > 1, where);
        }

        // Up to this many headers a repeated key is found by comparing with those before it; a record with more
        // (rare, and a producer could send thousands) goes through a hash map.
        private static final int SMALL = 16;

        private static Map<String, String> lastOfEach(String[] pairs, int n) {
            Map<String, String> byKey = new HashMap<>();
            for (int i = 0; i < n; i++) {
                byKey.put(pairs[2 * i], pairs[2 * i + 1]);
            }
            return byKey;
        }

        /** The first {@code n} distinct pairs as the immutable map Delivery keeps (one or two without entries). */
        @SuppressWarnings({"unchecked", "rawtypes"})
        private static Map<String, String> immutable(String[] pairs, int n) {
            return switch (n) {
                case 0 -> Map.of();
                case 1 -> Map.of(pairs[0], pairs[1]);
                case 2 -> Map.of(pairs[0], pairs[1], pairs[2], pairs[3]);
                default -> {
                    Map.Entry<String, String>[] entries = new Map.Entry[n];
                    for (int i = 0; i < n; i++) {
                        entries[i] = Map.entry(pairs[2 * i], pairs[2 * i + 1]);
                    }
                    yield Map.ofEntries(entries);
                }
            };
        }

        private static int indexOf(String[] pairs, int n, String key) {
            for (int i = 0; i < n; i++) {
                if (pairs[2 * i].equals(key)) {
                    return i;
                }
            }
            return -1;
        }
    }

    private static final class Messaging {
        static boolean isMessage(Class<?> type) {
            return org.springframework.messaging.Message.class.isAssignableFrom(type);
        }

        static Delivery delivery(Object message, String header, String eventId) {
            var m = (org.springframework.messaging.Message<?>) message;
            Map<String, String> headers = new LinkedHashMap<>();
            m.getHeaders().forEach((k, v) -> {
                if (v instanceof String || v instanceof byte[] || v instanceof Number || v instanceof Boolean) {
                    headers.put(k, text(v));
                }
            });
            String id = eventId != null ? eventId : text(m.getHeaders().get(header));
            if (m.getHeaders().containsKey(Sqs.RECEIPT_HANDLE)) {
                return Sqs.delivery(m, headers, header, id);
            }
            Object original = SPRING_PUBSUB ? PubSub.original(m) : null;
            if (original != null) {
                // from a PubSubInboundChannelAdapter: the attributes are the headers; the attempt is the client's
                String where = PubSub.where(original);
                int attempt = PubSub.attempt(original);
                return ListenerMessages.delivery(
                        required(id, header, where), m.getPayload(), headers, attempt, attempt > 1, where);
            }
            return ListenerMessages.delivery(
                    required(id, header, "message " + m.getHeaders().getId()),
                    m.getPayload(),
                    headers,
                    1,
                    false,
                    "message");
        }
    }

    private static final class Amqp {
        static boolean isMessage(Class<?> type) {
            return org.springframework.amqp.core.Message.class.isAssignableFrom(type);
        }

        static Delivery delivery(Object message, String header, String eventId) {
            var m = (org.springframework.amqp.core.Message) message;
            var props = m.getMessageProperties();
            Map<String, String> headers = new LinkedHashMap<>();
            props.getHeaders().forEach((k, v) -> {
                if (v != null) {
                    headers.put(k, text(v));
                }
            });
            String where = "rabbitmq:" + props.getConsumerQueue();
            String id = eventId != null ? eventId : text(props.getHeader(header));
            Object count = props.getHeader("x-delivery-count");
            int attempt = count instanceof Number n ? n.intValue() + 1 : 1;
            boolean redelivered = Boolean.TRUE.equals(props.isRedelivered());
            return new Delivery(required(id, header, where), "", m.getBody(), headers, attempt, redelivered, where);
        }
    }

    /** Spring Cloud GCP Pub/Sub, loaded only with spring-cloud-gcp-pubsub on the class path. */
    private static final class PubSub {
        static boolean isMessage(Class<?> type) {
            return com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage.class.isAssignableFrom(
                    type);
        }

        static Object original(Object message) {
            Object o = ((org.springframework.messaging.Message<?>) message)
                    .getHeaders()
                    .get(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE);
            return o != null && isMessage(o.getClass()) ? o : null;
        }

        static String where(Object message) {
            var m = (com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage) message;
            return "pubsub:" + m.getProjectSubscriptionName() + "#"
                    + m.getPubsubMessage().getMessageId();
        }

        /** The client's delivery attempt: counted only on subscriptions with a dead-letter policy, else 1. */
        static int attempt(Object message) {
            var m = (com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage) message;
            Integer counted = com.google.cloud.pubsub.v1.Subscriber.getDeliveryAttempt(m.getPubsubMessage());
            return counted == null ? 1 : Math.max(1, counted);
        }

        static Delivery delivery(Object message, String header, String eventId) {
            var m = (com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage) message;
            var p = m.getPubsubMessage();
            Map<String, String> headers = new LinkedHashMap<>(p.getAttributesMap());
            String where = where(m);
            String id = eventId != null ? eventId : p.getAttributesOrDefault(header, null);
            int attempt = attempt(m);
            // toByteArray copies the message's bytes into a new array: this delivery's to keep
            return Delivery.handingOver(
                    required(id, header, where), "", p.getData().toByteArray(), headers, attempt, attempt > 1, where);
        }
    }

    /**
     * Spring Cloud AWS SQS: the Spring {@code Message} its container hands to an {@code @SqsListener} method, whose
     * message attributes are headers of the same name. The event id is the message attribute {@code header} (the
     * producer's event id, {@code once-event-id} by default, as {@code once-sqs}'s consumer reads it), never the SQS
     * message id: a producer that retries a send after a lost reply makes a second message with a new id for the same
     * event. The header names are compile-time constants: reading them loads no Spring Cloud AWS class.
     */
    private static final class Sqs {
        static final String RECEIPT_HANDLE = io.awspring.cloud.sqs.listener.SqsHeaders.SQS_RECEIPT_HANDLE_HEADER;
        static final String QUEUE = io.awspring.cloud.sqs.listener.SqsHeaders.SQS_QUEUE_NAME_HEADER;
        static final String QUEUE_URL = io.awspring.cloud.sqs.listener.SqsHeaders.SQS_QUEUE_URL_HEADER;
        // a FIFO message's system attributes, requested by default (messageSystemAttributeNames: All)
        static final String GROUP =
                io.awspring.cloud.sqs.listener.SqsHeaders.MessageSystemAttributes.SQS_MESSAGE_GROUP_ID_HEADER;
        static final String SEQUENCE_NUMBER =
                io.awspring.cloud.sqs.listener.SqsHeaders.MessageSystemAttributes.SQS_SEQUENCE_NUMBER;
        static final String RECEIVE_COUNT =
                io.awspring.cloud.sqs.listener.SqsHeaders.MessageSystemAttributes.SQS_APPROXIMATE_RECEIVE_COUNT;
        static final String RAW_MESSAGE_ID = io.awspring.cloud.sqs.listener.SqsHeaders.SQS_RAW_MESSAGE_ID_HEADER;
        static final String ACKNOWLEDGEMENT_CALLBACK =
                io.awspring.cloud.sqs.MessagingHeaders.ACKNOWLEDGMENT_CALLBACK_HEADER;

        static boolean isAcknowledgement(Class<?> type) {
            return io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement.class.isAssignableFrom(type);
        }

        static boolean isBatchAcknowledgement(Class<?> type) {
            return io.awspring.cloud.sqs.listener.acknowledgement.BatchAcknowledgement.class.isAssignableFrom(type);
        }

        static Delivery delivery(
                org.springframework.messaging.Message<?> m, Map<String, String> headers, String header, String id) {
            Object raw = m.getHeaders().get(RAW_MESSAGE_ID);
            String messageId =
                    raw != null ? raw.toString() : String.valueOf(m.getHeaders().getId());
            String where = "sqs:" + m.getHeaders().get(QUEUE) + "#" + messageId;
            if (id == null) {
                throw new InvalidDeliveryException(
                        "SQS message " + messageId + " from " + m.getHeaders().get(QUEUE)
                                + " has no message attribute '" + header
                                + "' with the producer's event id; publish with"
                                + " once's SqsPublisher or set that attribute (or set @IdempotentListener(eventId = \"<SpEL>\"))");
            }
            headers.put("sqs-message-id", messageId);
            int attempt = 1;
            if (m.getHeaders().get(RECEIVE_COUNT) instanceof String count) {
                try {
                    attempt = Math.max(1, Integer.parseInt(count));
                } catch (NumberFormatException e) {
                    // not SQS's: the first attempt, as once-sqs reads it
                }
            }
            return ListenerMessages.delivery(id, m.getPayload(), headers, attempt, attempt > 1, where);
        }
    }
}
