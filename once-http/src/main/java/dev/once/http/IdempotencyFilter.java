package dev.once.http;

import dev.once.InvalidConfigurationException;
import dev.once.http.internal.Gate;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * A Jakarta Servlet filter for the {@code Idempotency-Key} request header (IETF
 * draft-ietf-httpapi-idempotency-key-header), backed by {@link IdempotencyKeys}: a client that
 * retries a POST with the same key gets the first response again instead of a second effect.
 *
 * <pre>{@code
 * IdempotencyKeys keys = IdempotencyKeys.builder().dataSource(ds).build();
 * context.addFilter(new FilterHolder(IdempotencyFilter.builder()
 *         .keys(keys)
 *         .scope(request -> request.getHeader("X-Tenant"))   // whose keys these are
 *         .build()), "/payments/*", EnumSet.of(DispatcherType.REQUEST));
 * }</pre>
 *
 * <p><b>Answers</b> for requests with a covered method ({@link Builder#methods}, default POST and PATCH):
 * <ul>
 * <li>no header where {@link Builder#required} (the default): <b>400</b>, problem+json;</li>
 * <li>a malformed key (blank, over 255 characters, control characters): <b>400</b>;</li>
 * <li>the key is held by a request still running: <b>409</b>;</li>
 * <li>the key was used with another request (method, path and query, or body differ): <b>422</b>;</li>
 * <li>the key finished before: its saved status, content type and body, byte for byte, with
 *     {@code Idempotent-Replayed: true};</li>
 * <li>otherwise the request runs. A response below 500 is saved and replayed to later retries; a 5xx
 *     or an exception is not saved, so a retry runs the request again.</li>
 * </ul>
 * Other methods pass through untouched. The request body is buffered (at most
 * {@link Builder#maxRequestBytes}, else <b>413</b>) to fingerprint it, and the response is buffered
 * to save it, up to {@link IdempotencyKeys#maxResultBytes()}, so this filter suits API calls, not
 * streaming; asynchronous servlets are not supported. A response larger than that cannot be saved:
 * the filter answers <b>500</b> (problem+json) instead; in transactional mode the effect is rolled
 * back and the key released, otherwise that 500 is saved as the key's permanent result, because the
 * effect may have happened and a retry must not run it again.
 *
 * <p><b>Effect and result in one transaction</b> ({@link Builder#transactional}): when the handler's
 * effect is a write to the keys' database, let it run on {@link #transaction(ServletRequest)}'s
 * connection; the saved response then commits with it, so a crash between the two leaves neither,
 * and a request that outlived its claim while a retry took over is rolled back instead of applying
 * the effect a second time. Effects elsewhere are not covered: pass the key on to them. When the
 * database connection fails while the result is saved (the commit may have gone through and only its
 * reply been lost) the answer is <b>500</b> saying the outcome is unknown: a retry with the same key
 * replays the result if it committed, and runs the request if it did not.
 *
 * <p>Immutable and thread-safe.
 */
public final class IdempotencyFilter implements Filter {

    /** Methods covered unless configured: the non-idempotent ones. */
    public static final Set<String> DEFAULT_METHODS = Set.of("POST", "PATCH");
    /** Largest request body accepted with a key unless configured. */
    public static final int DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024;
    /** The scope of every key unless a scope function is configured. */
    public static final String DEFAULT_SCOPE = "http";

    private static final String TRANSACTION_ATTRIBUTE = KeyTransaction.class.getName();

    private final Gate gate;
    private final Function<HttpServletRequest, String> scope;

    private IdempotencyFilter(Gate gate, Function<HttpServletRequest, String> scope) {
        this.gate = gate;
        this.scope = scope;
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        if (!(req instanceof HttpServletRequest request)
                || !(res instanceof HttpServletResponse response)
                || !gate.covers(request.getMethod())) {
            chain.doFilter(req, res);
            return;
        }
        String header = request.getHeader(Gate.HEADER);
        byte[] body = readAtMost(request.getInputStream(), gate.maxRequestBytes());
        if (body == null) {
            send(response, gate.tooLarge());
            return;
        }
        String target =
                request.getRequestURI() + (request.getQueryString() == null ? "" : "?" + request.getQueryString());
        Gate.Decision decision =
                gate.begin(header == null ? null : scope.apply(request), request.getMethod(), target, header, body);
        CachedRequest cached = new CachedRequest(request, body);
        if (decision instanceof Gate.PassThrough) {
            chain.doFilter(cached, response);
            return;
        }
        if (decision instanceof Gate.Respond answer) {
            send(response, answer);
            return;
        }
        Gate.Proceed proceed = (Gate.Proceed) decision;
        if (proceed.transaction() != null) {
            cached.setAttribute(TRANSACTION_ATTRIBUTE, proceed.transaction());
        }
        CapturingResponse capture = new CapturingResponse(response, gate.maxResponseBytes());
        try {
            chain.doFilter(cached, capture);
        } catch (IOException | ServletException | RuntimeException | Error e) {
            gate.abandon(proceed);
            throw e;
        } finally {
            cached.removeAttribute(TRANSACTION_ATTRIBUTE);
        }
        byte[] produced = capture.bytes();
        if (capture.error != null) {
            // sendError: let the container render its error page; only the status is saved.
            Gate.Respond override = gate.finish(proceed, capture.status, null, new byte[0], false);
            if (override != null) {
                send(response, override);
            } else {
                response.sendError(capture.status, capture.error.isEmpty() ? null : capture.error);
            }
            return;
        }
        Gate.Respond override =
                gate.finish(proceed, capture.status, response.getContentType(), produced, capture.buffer.overflowed());
        if (override != null) {
            response.reset();
            send(response, override);
            return;
        }
        response.setStatus(capture.status);
        response.setContentLength(produced.length);
        response.getOutputStream().write(produced);
    }

    /**
     * The transaction a request runs in when the filter is {@link Builder#transactional transactional}:
     * apply the effect on its {@link KeyTransaction#connection() connection}, and the filter commits it
     * with the saved response (never commit it yourself). Empty for requests the filter does not cover,
     * without a key, or when it is not transactional.
     */
    public static Optional<KeyTransaction> transaction(ServletRequest request) {
        return Optional.ofNullable((KeyTransaction) request.getAttribute(TRANSACTION_ATTRIBUTE));
    }

    private static void send(HttpServletResponse response, Gate.Respond answer) throws IOException {
        response.setStatus(answer.status());
        if (answer.contentType() != null) {
            response.setContentType(answer.contentType());
        }
        if (answer.replayed()) {
            response.setHeader(Gate.REPLAYED_HEADER, "true");
        }
        response.setContentLength(answer.body().length);
        response.getOutputStream().write(answer.body());
    }

    /** Reads the whole body, or returns null when it is longer than {@code max}. */
    static byte[] readAtMost(InputStream in, int max) throws IOException {
        byte[] bytes = in.readNBytes(max + 1);
        return bytes.length > max ? null : bytes;
    }

    /** The request with its already-read body, readable again by the servlet. */
    private static final class CachedRequest extends HttpServletRequestWrapper {
        private final byte[] body;

        CachedRequest(HttpServletRequest request, byte[] body) {
            super(request);
            this.body = body;
        }

        @Override
        public ServletInputStream getInputStream() {
            ByteArrayInputStream in = new ByteArrayInputStream(body);
            return new ServletInputStream() {
                @Override
                public boolean isFinished() {
                    return in.available() == 0;
                }

                @Override
                public boolean isReady() {
                    return true;
                }

                @Override
                public void setReadListener(ReadListener listener) {
                    throw new UnsupportedOperationException(
                            "the Idempotency-Key filter buffers the body;" + " asynchronous reads are not supported");
                }

                @Override
                public int read() {
                    return in.read();
                }

                @Override
                public int read(byte[] b, int off, int len) {
                    return in.read(b, off, len);
                }
            };
        }

        @Override
        public BufferedReader getReader() {
            String enc = getCharacterEncoding();
            Charset cs = enc == null ? StandardCharsets.UTF_8 : Charset.forName(enc);
            return new BufferedReader(new InputStreamReader(new ByteArrayInputStream(body), cs));
        }

        @Override
        public int getContentLength() {
            return body.length;
        }

        @Override
        public long getContentLengthLong() {
            return body.length;
        }
    }

    /**
     * Holds the servlet's response back until it is saved; headers go straight to the real response.
     * The body is kept up to the most a key can save: what the servlet writes past that is dropped
     * and the gate answers for it ({@link Gate#finish}).
     */
    private static final class CapturingResponse extends HttpServletResponseWrapper {
        private final BoundedBuffer buffer;
        private int status = SC_OK;
        private String error;
        private PrintWriter writer;
        private ServletOutputStream stream;

        CapturingResponse(HttpServletResponse response, int limit) {
            super(response);
            this.buffer = new BoundedBuffer(limit);
        }

        byte[] bytes() {
            if (writer != null) {
                writer.flush();
            }
            return buffer.toByteArray();
        }

        @Override
        public void setStatus(int sc) {
            this.status = sc;
        }

        @Override
        public int getStatus() {
            return status;
        }

        @Override
        public void sendError(int sc, String msg) {
            this.status = sc;
            this.error = msg == null ? "" : msg;
        }

        @Override
        public void sendError(int sc) {
            sendError(sc, null);
        }

        @Override
        public void sendRedirect(String location) {
            setStatus(SC_FOUND);
            setHeader("Location", location);
        }

        @Override
        public ServletOutputStream getOutputStream() {
            if (stream == null) {
                stream = new ServletOutputStream() {
                    @Override
                    public boolean isReady() {
                        return true;
                    }

                    @Override
                    public void setWriteListener(WriteListener listener) {
                        throw new UnsupportedOperationException("the Idempotency-Key filter buffers the response;"
                                + " asynchronous writes are not supported");
                    }

                    @Override
                    public void write(int b) {
                        buffer.write(b);
                    }

                    @Override
                    public void write(byte[] b, int off, int len) {
                        buffer.write(b, off, len);
                    }
                };
            }
            return stream;
        }

        @Override
        public PrintWriter getWriter() {
            if (writer == null) {
                String enc = getCharacterEncoding();
                Charset cs = enc == null ? StandardCharsets.ISO_8859_1 : Charset.forName(enc);
                writer = new PrintWriter(new OutputStreamWriter(buffer, cs));
            }
            return writer;
        }

        @Override
        public void flushBuffer() {
            if (writer != null) {
                writer.flush();
            }
        }

        @Override
        public boolean isCommitted() {
            return false;
        }

        @Override
        public void resetBuffer() {
            buffer.reset();
        }

        @Override
        public void reset() {
            super.reset();
            buffer.reset();
            status = SC_OK;
        }

        @Override
        public void setContentLength(int len) {
            // the real length is set when the buffered body is written
        }

        @Override
        public void setContentLengthLong(long len) {
            // the real length is set when the buffered body is written
        }
    }

    /** Bytes up to a limit; the rest is counted as an overflow and dropped. */
    static final class BoundedBuffer extends ByteArrayOutputStream {
        private final int limit;
        private boolean overflowed;

        BoundedBuffer(int limit) {
            this.limit = limit;
        }

        boolean overflowed() {
            return overflowed;
        }

        @Override
        public synchronized void write(int b) {
            if (count < limit) {
                super.write(b);
            } else {
                overflowed = true;
            }
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            int room = Math.min(len, limit - count);
            super.write(b, off, room);
            if (room < len) {
                overflowed = true;
            }
        }

        @Override
        public synchronized void reset() {
            super.reset();
            overflowed = false;
        }
    }

    /** Builds an {@link IdempotencyFilter}; {@code keys} is required. Not thread-safe. */
    public static final class Builder extends GateBuilder<HttpServletRequest, Builder> {

        private Builder() {}

        @Override
        Builder self() {
            return this;
        }

        /** @throws InvalidConfigurationException if {@code keys} is not set */
        public IdempotencyFilter build() {
            return new IdempotencyFilter(gate(), scope());
        }
    }
}
