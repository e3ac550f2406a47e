package dev.once.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.context.annotation.Import;

/**
 * Turns on {@link IdempotentListener} for the beans of this context. Needs one {@link OnceSpring} bean
 * (the Boot starter defines it from the application's {@code DataSource} and transaction manager).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Import(IdempotentListenerConfiguration.class)
public @interface EnableIdempotentListeners {}
