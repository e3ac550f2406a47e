package dev.once.http;

import dev.once.InvalidConfigurationException;
import dev.once.http.internal.Gate;
import dev.once.keys.IdempotencyKeys;
import java.util.HashSet;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * The settings the servlet filter and the Javalin wrapper share; {@code R} is the framework's
 * request type the scope is read from. Not thread-safe.
 */
abstract class GateBuilder<R, B extends GateBuilder<R, B>> {

    private IdempotencyKeys keys;
    private boolean required = true;
    private Set<String> methods = IdempotencyFilter.DEFAULT_METHODS;
    private int maxRequestBytes = IdempotencyFilter.DEFAULT_MAX_REQUEST_BYTES;
    private Function<R, String> scope = r -> IdempotencyFilter.DEFAULT_SCOPE;
    private boolean transactional;

    abstract B self();

    /** The store of keys and saved responses. Required. */
    public B keys(IdempotencyKeys keys) {
        this.keys = Objects.requireNonNull(keys, "keys");
        return self();
    }

    /** True (default): a covered request without the header is answered 400. False: it passes through unprotected. */
    public B required(boolean required) {
        this.required = required;
        return self();
    }

    /** The HTTP methods covered; default {@link IdempotencyFilter#DEFAULT_METHODS}. */
    public B methods(String... methods) {
        if (methods.length == 0) {
            throw new InvalidConfigurationException("methods must name at least one HTTP method, but was empty");
        }
        Set<String> upper = new HashSet<>();
        for (String m : methods) {
            if (m == null || !m.matches("[A-Za-z]{1,20}")) {
                throw new InvalidConfigurationException(
                        "methods must be HTTP method names, but one was " + (m == null ? "null" : "'" + m + "'"));
            }
            upper.add(m.toUpperCase(Locale.ROOT));
        }
        this.methods = Set.copyOf(upper);
        return self();
    }

    /**
     * Whose keys a request's key belongs to: the tenant or API client, usually from the
     * authenticated principal. Keys of different scopes never see each other's responses. A null or
     * blank scope is answered 400. Default: every key in scope {@value IdempotencyFilter#DEFAULT_SCOPE}.
     */
    public B scope(Function<R, String> scope) {
        this.scope = Objects.requireNonNull(scope, "scope");
        return self();
    }

    /** Largest request body accepted with a key, 1 byte to 64 MiB; default {@value IdempotencyFilter#DEFAULT_MAX_REQUEST_BYTES}. */
    public B maxRequestBytes(int maxRequestBytes) {
        if (maxRequestBytes < 1 || maxRequestBytes > 64 * 1024 * 1024) {
            throw new InvalidConfigurationException(
                    "maxRequestBytes must be between 1 and 67108864, but was " + maxRequestBytes);
        }
        this.maxRequestBytes = maxRequestBytes;
        return self();
    }

    /**
     * True: each request with a key runs in a transaction on the keys' database, which the handler
     * reaches through {@code transaction(request)} and applies its effect on; the saved result commits
     * with the effect, a 5xx or an exception rolls the effect back, and a request that outlived its
     * claim while a retry took over has its effect rolled back (409). Use it when the effect is a
     * write to that database. Default false: the handler applies its effect where it likes and the
     * result is saved after it, so a crash between the two leaves the key to be run again.
     */
    public B transactional(boolean transactional) {
        this.transactional = transactional;
        return self();
    }

    /** @throws InvalidConfigurationException if {@code keys} is not set */
    Gate gate() {
        if (keys == null) {
            throw new InvalidConfigurationException("keys (an IdempotencyKeys store) is required, but was not set");
        }
        return new Gate(keys, required, methods, maxRequestBytes, transactional);
    }

    Function<R, String> scope() {
        return scope;
    }
}
