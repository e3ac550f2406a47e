package dev.once.http;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/** The contract through the servlet filter on Jetty 12 (ee10). */
class IdempotencyFilterTest extends HttpIdempotencyContract {

    private Server server;

    @Override
    protected String start(Endpoint endpoint) throws Exception {
        server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        ServletContextHandler context = new ServletContextHandler();
        context.setContextPath("/");
        context.addServlet(
                new ServletHolder(new HttpServlet() {
                    @Override
                    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
                        String body = new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                        Response r;
                        try {
                            r = endpoint.handle(
                                    tenant(req.getHeader("X-Tenant")),
                                    body,
                                    IdempotencyFilter.transaction(req)
                                            .map(t -> t.connection())
                                            .orElse(null));
                        } catch (RuntimeException e) {
                            throw e;
                        } catch (Exception e) {
                            throw new IOException(e);
                        }
                        resp.setStatus(r.status());
                        resp.setContentType(r.contentType());
                        resp.getOutputStream().write(r.body().getBytes(StandardCharsets.UTF_8));
                    }

                    @Override
                    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
                        resp.getWriter().write("list");
                    }
                }),
                "/payments");
        context.addFilter(
                new FilterHolder(IdempotencyFilter.builder()
                        .keys(keys)
                        .scope(r -> tenant(r.getHeader("X-Tenant")))
                        .transactional(transactional())
                        .build()),
                "/*",
                EnumSet.of(DispatcherType.REQUEST));
        server.setHandler(context);
        server.start();
        return "http://127.0.0.1:" + connector.getLocalPort();
    }

    @Override
    protected void stop() throws Exception {
        server.stop();
    }
}
