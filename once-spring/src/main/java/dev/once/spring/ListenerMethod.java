package dev.once.spring;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import java.lang.reflect.Method;
import java.util.List;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.context.expression.BeanFactoryResolver;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ResolvableType;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * What an {@link IdempotentListener} method needs at every call, worked out once: the consumer, where
 * the event id comes from, which argument is the message, the batch, the {@code Acknowledgment}.
 *
 * @param messageIndex the record/message argument, or -1
 * @param batchIndex   the {@code List} of records/messages of a batch listener, or -1
 * @param ackIndex     the Spring Kafka {@code Acknowledgment} or Spring Cloud AWS SQS {@code Acknowledgement} argument,
 *                     or -1
 * @param channelIndex the RabbitMQ {@code Channel} argument of a MANUAL-ack listener, or -1
 * @param pubSubIndex  the Spring Cloud GCP {@code BasicAcknowledgeablePubsubMessage} argument, or -1
 * @param atCommit     {@link IdempotentListener#claimTiming()} is {@link ClaimTiming#AT_COMMIT}
 * @param kafka        a {@code @KafkaListener} method (or a method of a {@code @KafkaListener} class): its
 *                     records are ordered per partition, so one in progress elsewhere is waited for
 * @param rabbit       a {@code @RabbitListener} method (or a method of a {@code @RabbitListener} class): a message
 *                     in progress elsewhere is waited for, kept unacknowledged, since a requeue counts toward a
 *                     quorum queue's delivery limit
 * @param sqs          whether the method is an {@code @SqsListener}'s; who deletes its messages is read from each
 *                     call's arguments ({@link #sqsDeletedByListener})
 */
record ListenerMethod(
        Method method,
        String consumer,
        String header,
        Expression eventId,
        int messageIndex,
        int batchIndex,
        int ackIndex,
        int channelIndex,
        int pubSubIndex,
        boolean atCommit,
        boolean kafka,
        boolean rabbit,
        boolean sqs,
        BeanFactory beanFactory) {

    private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();
    private static final SpelExpressionParser PARSER = new SpelExpressionParser();

    /**
     * @throws InvalidConfigurationException if the consumer name is invalid, the SpEL does not parse, or
     *         the method has no argument the event id can be read from
     */
    static ListenerMethod of(Method method, BeanFactory beanFactory) {
        IdempotentListener a = AnnotatedElementUtils.findMergedAnnotation(method, IdempotentListener.class);
        if (a == null) {
            throw new InvalidConfigurationException(method + " is not annotated with @IdempotentListener");
        }
        String where = "@IdempotentListener on " + method.getDeclaringClass().getSimpleName() + "." + method.getName();
        // validates the name the same way every consumer does
        IdempotentConsumer.builder().consumer(a.consumer());
        if (a.header().isBlank()) {
            throw new InvalidConfigurationException(where + ": header must not be blank");
        }
        Expression expression = null;
        if (!a.eventId().isBlank()) {
            try {
                expression = PARSER.parseExpression(a.eventId());
            } catch (RuntimeException e) {
                throw new InvalidConfigurationException(where + ": eventId must be a SpEL expression, but '"
                        + a.eventId() + "' does not parse: " + e.getMessage());
            }
        }
        int message = -1;
        int batch = -1;
        int ack = -1;
        int channel = -1;
        int pubSub = -1;
        Class<?>[] types = method.getParameterTypes();
        // A List of payloads (List<Payment>, a batch listener whose values the container converted) is a batch
        // when the method has no message argument and eventId says how to read each element's id.
        boolean payloads = expression != null && java.util.Arrays.stream(types).noneMatch(ListenerMessages::isMessage);
        for (int i = 0; i < types.length; i++) {
            if (ListenerMessages.isPubSub(types[i]) && pubSub < 0) {
                pubSub = i;
            }
            if (ListenerMessages.isMessage(types[i]) && message < 0) {
                message = i;
            } else if (List.class.isAssignableFrom(types[i]) && batch < 0) {
                Class<?> element = ResolvableType.forMethodParameter(method, i)
                        .asCollection()
                        .resolveGeneric(0);
                if (element != null && (ListenerMessages.isMessage(element) || payloads)) {
                    batch = i;
                }
            } else if (ListenerMessages.isChannel(types[i])) {
                channel = i;
            } else if ((ListenerMessages.SPRING_KAFKA
                            && ClassUtils.isAssignable(
                                    org.springframework.kafka.support.Acknowledgment.class, types[i]))
                    || ListenerMessages.isSqsAcknowledgement(types[i])) {
                ack = i;
            }
        }
        if (batch >= 0) {
            message = -1;
        }
        if (channel >= 0 && (message < 0 || !ListenerMessages.carriesDeliveryTag(types[message]))) {
            throw new InvalidConfigurationException(where + " takes a RabbitMQ Channel, so its acknowledgements"
                    + " are deferred to after the commit, which needs the delivery tag: add an"
                    + " org.springframework.amqp.core.Message (or org.springframework.messaging.Message) parameter"
                    + (batch >= 0
                            ? "; a batch listener with a Channel is not supported, use AcknowledgeMode.AUTO"
                            : ""));
        }
        if (batch >= 0
                && ListenerMessages.isPubSub(ResolvableType.forMethodParameter(method, batch)
                        .asCollection()
                        .resolveGeneric(0))) {
            throw new InvalidConfigurationException(where + " takes a List of Pub/Sub messages: a batch listener"
                    + " cannot ack each message after its commit; take one BasicAcknowledgeablePubsubMessage per call"
                    + " (PubSubTemplate.subscribe) or a Message<?> from a PubSubInboundChannelAdapter");
        }
        boolean sqs = ListenerMessages.SPRING_SQS && Sqs.check(method, types, ack, batch, beanFactory, where);
        boolean atCommit = a.claimTiming() == ClaimTiming.AT_COMMIT;
        if (atCommit && (batch >= 0 || channel >= 0)) {
            throw new InvalidConfigurationException(where + " sets claimTiming = AT_COMMIT, which cannot be kept for"
                    + (batch >= 0
                            ? " a batch listener: its batch is claimed in one statement before the body"
                            : " a method taking a RabbitMQ Channel: its acks are settled when the transaction ends,"
                                    + " before once can tell a copy from a failure")
                    + "; remove the setting (ClaimTiming.BEFORE_HANDLER)");
        }
        if (expression != null) {
            ResolvableType root = batch >= 0
                    ? ResolvableType.forMethodParameter(method, batch)
                            .asCollection()
                            .getGeneric(0)
                    : message >= 0 ? ResolvableType.forMethodParameter(method, message) : ResolvableType.NONE;
            EventIdCheck.check(expression, method, root, batch >= 0, NAMES, where);
        }
        if (message < 0 && batch < 0 && expression == null) {
            throw new InvalidConfigurationException(where + " cannot find the event id: the method has no"
                    + " ConsumerRecord, Message or List<ConsumerRecord> parameter to read header '" + a.header()
                    + "' from; add one, or set eventId = \"<SpEL over the arguments>\"");
        }
        return new ListenerMethod(
                method,
                a.consumer(),
                a.header(),
                expression,
                message,
                batch,
                ack,
                channel,
                pubSub,
                atCommit,
                ListenerMessages.SPRING_KAFKA && Kafka.isListener(method),
                ListenerMessages.SPRING_RABBIT && Rabbit.isListener(method),
                sqs,
                beanFactory);
    }

    /** Spring Cloud AWS SQS pieces, loaded only with spring-cloud-aws-sqs on the class path. */
    private static final class Sqs {
        /**
         * Whether {@code method} is an {@code @SqsListener}'s, refusing what its annotation alone shows once cannot
         * keep. The mode is not decided here: the container factory's options (or a customizer) set it where the
         * annotation leaves it empty, so each call reads it from its message ({@link #sqsDeletedByListener}).
         *
         * @throws InvalidConfigurationException for a mode or a signature whose deletes once cannot hold back until
         *     the commit
         */
        static boolean check(
                Method method, Class<?>[] types, int ack, int batch, BeanFactory beanFactory, String where) {
            Class<io.awspring.cloud.sqs.annotation.SqsListener> type =
                    io.awspring.cloud.sqs.annotation.SqsListener.class;
            io.awspring.cloud.sqs.annotation.SqsListener listener =
                    AnnotatedElementUtils.findMergedAnnotation(method, type);
            if (listener == null) {
                listener = AnnotatedElementUtils.findMergedAnnotation(method.getDeclaringClass(), type);
            }
            if (listener == null) {
                return false;
            }
            String mode = listener.acknowledgementMode();
            if (beanFactory instanceof org.springframework.beans.factory.config.ConfigurableBeanFactory c) {
                mode = c.resolveEmbeddedValue(mode); // ${...}, as Spring Cloud AWS resolves it
            }
            mode = mode == null ? "" : mode.trim();
            if (mode.equals("ALWAYS")) {
                throw new InvalidConfigurationException(where + " is an @SqsListener with acknowledgementMode = ALWAYS,"
                        + " which deletes a message whose call failed and rolled back: its event would be lost; use"
                        + " ON_SUCCESS (the default) or MANUAL with an Acknowledgement parameter");
            }
            // an Acknowledgement argument is resolved in MANUAL mode only, wherever the mode was set
            boolean manual = mode.equals("MANUAL") || (mode.isEmpty() && ack >= 0);
            if (batch >= 0) {
                boolean batchAck = java.util.Arrays.stream(types).anyMatch(ListenerMessages::isSqsBatchAcknowledgement);
                if (manual || batchAck) {
                    throw new InvalidConfigurationException(where + " is a batch @SqsListener "
                            + (batchAck ? "taking a BatchAcknowledgement" : "in acknowledgementMode MANUAL")
                            + ": once cannot hold each message's delete back until its claim commits; take one"
                            + " Message<?> and an Acknowledgement per call (MANUAL), or a List without"
                            + " BatchAcknowledgement in ON_SUCCESS mode (the container deletes the batch after the"
                            + " method returned, so after the commit)");
                }
            }
            if (!mode.isEmpty() && !mode.equals("MANUAL") && !mode.equals("ON_SUCCESS")) {
                throw new InvalidConfigurationException(where + ": @SqsListener acknowledgementMode must be ON_SUCCESS"
                        + " or MANUAL, but was '" + mode + "'");
            }
            return true;
        }
    }

    /** Kafka-specific pieces, loaded only with spring-kafka on the class path. */
    private static final class Kafka {
        static boolean isListener(Method method) {
            Class<org.springframework.kafka.annotation.KafkaListener> a =
                    org.springframework.kafka.annotation.KafkaListener.class;
            return AnnotatedElementUtils.hasAnnotation(method, a)
                    || AnnotatedElementUtils.hasAnnotation(method.getDeclaringClass(), a);
        }
    }

    /** Spring AMQP pieces, loaded only with spring-rabbit on the class path. */
    private static final class Rabbit {
        static boolean isListener(Method method) {
            Class<org.springframework.amqp.rabbit.annotation.RabbitListener> a =
                    org.springframework.amqp.rabbit.annotation.RabbitListener.class;
            return AnnotatedElementUtils.hasAnnotation(method, a)
                    || AnnotatedElementUtils.hasAnnotation(method.getDeclaringClass(), a);
        }
    }

    /**
     * Whether the container that made this call of an {@code @SqsListener} method leaves the delete to the listener
     * ({@code AcknowledgementMode.MANUAL}): its {@code Acknowledgement} argument (resolved in MANUAL mode only) or
     * its message(s) carry the container's acknowledgement callback ({@link ListenerMessages#deletedByListener}).
     * Read from the call, not from the signature or the annotation: a factory's MANUAL with neither an
     * {@code Acknowledgement} parameter nor the attribute counted as ON_SUCCESS, so its copies were never deleted.
     * False for a method taking neither: the container deletes (or nothing can).
     */
    boolean sqsDeletedByListener(Object[] args) {
        if (ackIndex >= 0
                && args[ackIndex] != null
                && ListenerMessages.isSqsAcknowledgement(args[ackIndex].getClass())) {
            return true;
        }
        if (messageIndex >= 0) {
            return ListenerMessages.deletedByListener(args[messageIndex]);
        }
        if (batchIndex >= 0 && args[batchIndex] instanceof List<?> batch && !batch.isEmpty()) {
            return ListenerMessages.deletedByListener(batch.get(0)); // one container, one mode for the whole batch
        }
        return false;
    }

    /** The delivery of a record listener's call. */
    Delivery delivery(Object[] args) {
        String id = eventId == null ? null : evaluate(args, messageIndex >= 0 ? args[messageIndex] : null);
        if (messageIndex >= 0) {
            return ListenerMessages.delivery(args[messageIndex], header, id);
        }
        return Delivery.builder(id).build();
    }

    /** The delivery of one element of a batch listener's list. */
    Delivery delivery(Object element) {
        String id = eventId == null ? null : evaluate(new Object[] {element}, element);
        return ListenerMessages.delivery(element, header, id);
    }

    private String evaluate(Object[] args, Object root) {
        MethodBasedEvaluationContext context = new MethodBasedEvaluationContext(root, method, args, NAMES);
        if (beanFactory != null) {
            context.setBeanResolver(new BeanFactoryResolver(beanFactory));
        }
        Object value;
        try {
            value = eventId.getValue(context);
        } catch (EvaluationException e) {
            throw new InvalidDeliveryException("eventId '" + eventId.getExpressionString() + "' of consumer '"
                    + consumer + "' failed: " + e.getMessage());
        }
        String id = ListenerMessages.text(value);
        if (id == null) {
            throw new InvalidDeliveryException("eventId '" + eventId.getExpressionString() + "' of consumer '"
                    + consumer + "' gave null: the message carries no event id");
        }
        return id;
    }
}
