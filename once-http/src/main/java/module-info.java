/**
 * Idempotency keys over HTTP: a servlet filter and a Javalin handler that answer a repeated request
 * with the first one's stored response. Javalin is optional: only {@code IdempotentHandler} needs it.
 */
module dev.once.http {
    requires transitive dev.once.core;
    requires transitive jakarta.servlet;
    requires static io.javalin;
    requires org.slf4j;

    exports dev.once.http;
}
