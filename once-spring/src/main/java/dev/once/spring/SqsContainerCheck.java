package dev.once.spring;

import dev.once.InvalidConfigurationException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.BridgeMethodResolver;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;

/**
 * Checks, before Spring Cloud AWS's SQS listener containers start, the acknowledgement mode each container really
 * runs an {@link IdempotentListener} method in: its resolved options (the container factory's, the annotation's
 * {@code acknowledgementMode} over them, any container customizer's), which the annotation alone does not show. A
 * container in {@code ALWAYS} deletes a message whose call failed and rolled back, so its event is lost; in
 * {@code MANUAL}, a batch method's body deletes its messages at once, before the claim commits, and a method taking
 * neither a {@code Message} nor an {@code Acknowledgement} cannot have its messages deleted by anyone (a copy comes back
 * until a dead-letter queue takes it). Each fails the context start, naming the method and the container. The check at
 * each call ({@link ListenerMethod#sqsDeletedByListener}) reads MANUAL from the message; ALWAYS cannot be refused
 * there, since the container deletes whatever the call does. A container on FIFO queues, in any mode, must give once
 * each message's {@code MessageGroupId} and {@code SequenceNumber} (its {@code messageSystemAttributeNames}) and the
 * method the message, by which once keeps each group's position ({@link #fifoProblem}).
 *
 * <p>What Spring Cloud AWS 4.1 shows publicly is used: the containers (the {@code MessageListenerContainerRegistry}'s
 * and container beans), each one's resolved options ({@code getContainerOptions().getAcknowledgementMode()}) and its
 * listener ({@code getMessageListener()}). Which method that listener calls it does not show: the endpoint an
 * {@code @SqsListener} made keeps its method private ({@code AbstractEndpoint} has {@code getBean()}, no getter for
 * the method), the {@code EndpointRegistrar} keeps its endpoints, the container factory hands no hook the endpoint, and
 * the adapters around the listener ({@code AsyncComponentAdapters}, {@code MessagingMessageListenerAdapter}) keep the
 * {@code InvocableHandlerMethod} in private fields. Matching containers to methods by id or queue names instead would
 * mistake two listeners on one queue (several factories, or a container bean beside an annotation). So that one step
 * stays reflective: the adapters' fields are read, and only Spring Cloud AWS's, to {@link #DEPTH}, down to the
 * {@code HandlerMethod} an endpoint made or to a listener object of the application's. The real-container tests
 * ({@code SqsIdempotentListenerTest}) refuse factories' modes through this step, so a Spring Cloud AWS whose adapters
 * hide the method otherwise fails them rather than passing unchecked.
 *
 * <p>A container bean given a listener object (a bean implementing {@code MessageListener} whose {@code onMessage} is
 * an {@link IdempotentListener}) is checked through that object's {@code onMessage}. A container given a lambda, or an
 * object that calls an {@link IdempotentListener} method of another bean, shows no method: what the lambda calls is in
 * its code, not in any field. Such a call is still checked at each call for MANUAL (its message carries the
 * container's callback), but an {@code ALWAYS} container is not refused: give it {@code ON_SUCCESS} or {@code MANUAL}.
 */
final class SqsContainerCheck implements SmartLifecycle {

    private static final Logger log = LoggerFactory.getLogger(SqsContainerCheck.class);

    /** Spring Cloud AWS's containers and their registry start in {@code Integer.MAX_VALUE}: this first. */
    static final int PHASE = Integer.MAX_VALUE - 1;

    // how deep the adapters around a container's listener are followed (three in Spring Cloud AWS 4.1)
    private static final int DEPTH = 6;

    private final ListableBeanFactory beans;
    private final IdempotentListenerInterceptor interceptor;
    private volatile boolean running;

    SqsContainerCheck(ListableBeanFactory beans, IdempotentListenerInterceptor interceptor) {
        this.beans = beans;
        this.interceptor = interceptor;
    }

    /**
     * @throws InvalidConfigurationException for an {@link IdempotentListener} method run by a container whose mode
     *     once cannot keep
     */
    @Override
    public void start() {
        Set<Object> containers = new LinkedHashSet<>();
        for (var registry :
                beans.getBeanProvider(io.awspring.cloud.sqs.listener.MessageListenerContainerRegistry.class)) {
            containers.addAll(registry.getListenerContainers());
        }
        containers.addAll(
                beans.getBeansOfType(io.awspring.cloud.sqs.listener.MessageListenerContainer.class, false, false)
                        .values());
        for (var container : containers) {
            if (container instanceof io.awspring.cloud.sqs.listener.AbstractMessageListenerContainer<?, ?, ?> c) {
                check(c);
            }
        }
        running = true;
    }

    private void check(io.awspring.cloud.sqs.listener.AbstractMessageListenerContainer<?, ?, ?> container) {
        var mode = container.getContainerOptions().getAcknowledgementMode();
        // Spring Cloud AWS runs a container on FIFO queues only when all of them are (FifoSqsComponentFactory)
        boolean fifo = !container.getQueueNames().isEmpty()
                && container.getQueueNames().stream().allMatch(q -> q.endsWith(".fifo"));
        if (mode == io.awspring.cloud.sqs.listener.acknowledgement.handler.AcknowledgementMode.ON_SUCCESS && !fifo) {
            return;
        }
        Set<Method> methods = new LinkedHashSet<>();
        handlerMethods(container.getMessageListener(), 0, methods);
        for (Method found : methods) {
            Method method = BridgeMethodResolver.findBridgedMethod(
                    ClassUtils.getMostSpecificMethod(found, ClassUtils.getUserClass(found.getDeclaringClass())));
            if (!AnnotatedElementUtils.hasAnnotation(method, IdempotentListener.class)) {
                continue;
            }
            ListenerMethod listener = interceptor.method(method);
            String where = "@IdempotentListener " + method.getDeclaringClass().getSimpleName() + "."
                    + method.getName() + " (consumer '" + listener.consumer() + "') runs in SQS listener container '"
                    + container.getId() + "', whose acknowledgementMode is " + mode
                    + " (its container factory's, the annotation's or a customizer's)";
            String problem = null;
            if (mode == io.awspring.cloud.sqs.listener.acknowledgement.handler.AcknowledgementMode.ALWAYS) {
                problem = ": it deletes a message whose call failed and rolled back, so the event would be lost; set"
                        + " @SqsListener(acknowledgementMode = \"ON_SUCCESS\") on it (the annotation overrides the"
                        + " factory), or MANUAL with an Acknowledgement parameter";
            } else if (mode == io.awspring.cloud.sqs.listener.acknowledgement.handler.AcknowledgementMode.ON_SUCCESS) {
                // nothing to refuse in the mode: only a FIFO queue's needs, below
            } else if (listener.batchIndex() >= 0) {
                problem = ": a batch body deletes its messages at once, and once cannot hold each delete back until"
                        + " its claim commits; use ON_SUCCESS for it (the container deletes the batch after the"
                        + " method returned, so after the commit), or take one Message<?> per call";
            } else if (listener.messageIndex() < 0 && listener.ackIndex() < 0) {
                problem = ": it takes neither a Message nor an Acknowledgement, so neither its body nor once (for a"
                        + " copy, whose body is skipped) can delete its messages, which come back until a dead-letter"
                        + " queue takes them; take a Message<?> or an Acknowledgement parameter, or use ON_SUCCESS";
            }
            if (problem == null && fifo) {
                where = "@IdempotentListener " + method.getDeclaringClass().getSimpleName() + "." + method.getName()
                        + " (consumer '" + listener.consumer() + "') runs in SQS listener container '"
                        + container.getId() + "' on FIFO queues " + container.getQueueNames();
                problem = fifoProblem(container.getContainerOptions(), listener);
            }
            if (problem != null) {
                InvalidConfigurationException refused = new InvalidConfigurationException(where + problem);
                log.error("{}", refused.getMessage());
                throw refused;
            }
        }
    }

    /**
     * What keeps once from fencing a FIFO queue's message groups for {@code listener}, or null. Once keeps each group's
     * position (its messages' {@code SequenceNumber}) in the database, so that a message a call held past its
     * visibility timeout, while SQS moved it to the dead-letter queue and handed its successors to another call, is
     * not applied after them; each message must carry its group and its sequence number, and the method must see the
     * message. Spring Cloud AWS requires {@code MessageGroupId} of a FIFO container itself, but not
     * {@code SequenceNumber}; both are requested by default ({@code All}).
     */
    private static String fifoProblem(Object options, ListenerMethod listener) {
        if (options instanceof io.awspring.cloud.sqs.listener.SqsContainerOptions sqs) {
            Collection<String> names = sqs.getMessageSystemAttributeNames();
            List<String> missing = new ArrayList<>();
            for (String needed : List.of("MessageGroupId", "SequenceNumber")) {
                if (!names.contains("All") && !names.contains(needed)) {
                    missing.add(needed);
                }
            }
            if (!missing.isEmpty()) {
                return ", whose messageSystemAttributeNames " + names + " leave out " + String.join(" and ", missing)
                        + ": once keeps each message group's position by its messages' MessageGroupId and"
                        + " SequenceNumber, so that a message held past its visibility timeout while SQS handed out"
                        + " its successors is not applied after them; leave messageSystemAttributeNames at their"
                        + " default (All), or add MessageSystemAttributeName."
                        + (missing.size() == 2
                                ? "MESSAGE_GROUP_ID and SEQUENCE_NUMBER"
                                : missing.get(0).equals("SequenceNumber") ? "SEQUENCE_NUMBER" : "MESSAGE_GROUP_ID")
                        + " to them (on its container factory's options)";
            }
        }
        Class<?> element = listener.batchIndex() < 0
                ? null
                : org.springframework.core.ResolvableType.forMethodParameter(listener.method(), listener.batchIndex())
                        .asCollection()
                        .resolveGeneric(0);
        if (listener.messageIndex() < 0 && (element == null || !ListenerMessages.isMessage(element))) {
            return ": it takes no Message (its event id comes from eventId), so once cannot read each message's"
                    + " MessageGroupId and SequenceNumber, by which it keeps the group's position (a message held past"
                    + " its visibility timeout while SQS handed out its successors must not be applied after them);"
                    + " take a Message<?> parameter (a List<Message<?>> for a batch)";
        }
        return null;
    }

    /**
     * The methods {@code o} calls: the {@code HandlerMethod}s in it and in the Spring Cloud AWS adapters it holds, to
     * {@link #DEPTH}, and the {@code onMessage} methods of an application's listener object they hold. Reflective,
     * on Spring Cloud AWS's classes only: no public API names the method (see the class comment).
     */
    private static void handlerMethods(Object o, int depth, Set<Method> out) {
        if (o == null || depth > DEPTH) {
            return;
        }
        if (o instanceof org.springframework.messaging.handler.HandlerMethod h) {
            out.add(h.getMethod());
            return;
        }
        if (o instanceof Collection<?> c) {
            for (Object e : new ArrayList<>(c)) {
                handlerMethods(e, depth + 1, out);
            }
            return;
        }
        if (!o.getClass().getName().startsWith("io.awspring.cloud.sqs.")) {
            // the application's listener object, given to a container bean: its own onMessage methods (a lambda's
            // carry no annotation; a proxy's user class has the application's)
            if (o instanceof io.awspring.cloud.sqs.listener.MessageListener<?>
                    || o instanceof io.awspring.cloud.sqs.listener.AsyncMessageListener<?>) {
                for (Method m : ClassUtils.getUserClass(o).getMethods()) {
                    if (m.getName().equals("onMessage")) {
                        out.add(m);
                    }
                }
            }
            return;
        }
        List<Field> fields = new ArrayList<>();
        for (Class<?> type = o.getClass(); type != null && type != Object.class; type = type.getSuperclass()) {
            fields.addAll(List.of(type.getDeclaredFields()));
        }
        for (Field f : fields) {
            if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive() || !f.trySetAccessible()) {
                continue;
            }
            try {
                handlerMethods(f.get(o), depth + 1, out);
            } catch (IllegalAccessException e) {
                // not readable: holds no method this check can see
            }
        }
    }

    @Override
    public void stop() {
        running = false;
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public int getPhase() {
        return PHASE;
    }
}
