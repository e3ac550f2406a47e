package dev.once.spring;

import java.lang.reflect.Method;
import java.util.Map;
import org.springframework.aop.framework.autoproxy.AbstractBeanFactoryAwareAdvisingPostProcessor;
import org.springframework.aop.support.AopUtils;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.AnnotatedElementUtils;

/**
 * Proxies beans with {@link IdempotentListener} methods (class-based proxies, so listener annotations
 * on the class keep working) and checks each such method when its bean is created, so a method whose
 * event id cannot be found fails the context start, not the first message.
 *
 * <p>With Spring Cloud AWS SQS present, registers {@link SqsContainerCheck}, which refuses a listener container whose
 * resolved acknowledgement mode once cannot keep before it starts.
 *
 * <p>Ordered ahead of Spring Kafka's and Spring AMQP's listener post-processors (both
 * {@link Ordered#LOWEST_PRECEDENCE}), so the endpoints they register call the proxy.
 */
public class IdempotentListenerPostProcessor extends AbstractBeanFactoryAwareAdvisingPostProcessor
        implements SmartInitializingSingleton {

    /** Runs before the listener-registering post-processors. */
    public static final int ORDER = Ordered.LOWEST_PRECEDENCE - 100;

    private static final String SQS_CONTAINER_CHECK = "dev.once.spring.sqsContainerCheck";
    private static final String PUBSUB_WAITS = "dev.once.spring.pubSubWaits";

    private IdempotentListenerInterceptor interceptor;

    public IdempotentListenerPostProcessor() {
        setProxyTargetClass(true);
        setBeforeExistingAdvisors(true);
        setOrder(ORDER);
    }

    @Override
    public void setBeanFactory(BeanFactory beanFactory) {
        super.setBeanFactory(beanFactory);
        this.interceptor = new IdempotentListenerInterceptor(beanFactory);
        this.advisor = new DefaultPointcutAdvisor(
                AnnotationMatchingPointcut.forMethodAnnotation(IdempotentListener.class), interceptor);
        // Pub/Sub calls waiting for a holder give up when the context stops (no registry knows their subscriber)
        if (ListenerMessages.SPRING_PUBSUB
                && beanFactory instanceof ConfigurableListableBeanFactory beans
                && !beans.containsSingleton(PUBSUB_WAITS)) {
            beans.registerSingleton(PUBSUB_WAITS, interceptor.pubSubWaits());
        }
        // the SQS containers' resolved acknowledgement modes are known only once they are built, before they start
        if (ListenerMessages.SPRING_SQS
                && beanFactory instanceof ConfigurableListableBeanFactory beans
                && !beans.containsSingleton(SQS_CONTAINER_CHECK)) {
            beans.registerSingleton(SQS_CONTAINER_CHECK, new SqsContainerCheck(beans, interceptor));
        }
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        Class<?> type = AopUtils.getTargetClass(bean);
        Map<Method, IdempotentListener> annotated =
                MethodIntrospector.selectMethods(type, (MethodIntrospector.MetadataLookup<IdempotentListener>)
                        m -> AnnotatedElementUtils.findMergedAnnotation(m, IdempotentListener.class));
        annotated.keySet().forEach(interceptor::method); // validates now, caches for the calls
        return super.postProcessAfterInitialization(bean, beanName);
    }

    /**
     * Builds the consumers of methods that claim at commit before any container starts, so a setting the
     * database cannot keep (MariaDB) fails the context start, not every message.
     */
    @Override
    public void afterSingletonsInstantiated() {
        interceptor.buildAtCommitConsumers();
    }
}
