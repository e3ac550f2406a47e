package dev.once.cli.demo;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;

/**
 * The consumer most code starts as: it applies whatever arrives. Each delivery credits the ledger
 * and charges the card at the provider, without an idempotency key. Every duplicate delivery is
 * a duplicate effect.
 */
final class NaiveLane extends Lane {

    static final String NAME = "naive";

    private final Set<String> seenPayments = ConcurrentHashMap.newKeySet();
    private final DataSource dataSource;
    private final HttpClient http;
    private final String chargesUrl;

    NaiveLane(
            String bootstrap,
            String topic,
            String group,
            Faults faults,
            DataSource dataSource,
            HttpClient http,
            String chargesUrl) {
        super(NAME, bootstrap, topic, group, faults);
        this.dataSource = dataSource;
        this.http = http;
        this.chargesUrl = chargesUrl;
    }

    @Override
    boolean[] process(List<Payment> batch, String worker) throws Exception {
        boolean[] ack = new boolean[batch.size()];
        for (int i = 0; i < batch.size(); i++) {
            Payment p = batch.get(i);
            try (Connection c = dataSource.getConnection();
                    PreparedStatement ps = c.prepareStatement(DemoSql.credit("naive_ledger"))) {
                ps.setString(1, p.eventId()); // 1 event id
                ps.setString(2, p.paymentId()); // 2 payment id
                ps.setInt(3, p.amount()); // 3 amount
                ps.setString(4, worker); // 4 worker
                ps.executeUpdate();
            }
            HttpResponse<String> r = http.send(
                    HttpRequest.newBuilder(URI.create(chargesUrl))
                            .timeout(Duration.ofSeconds(5))
                            .header("Content-Type", "application/json")
                            .header(PaymentProvider.CALLER, NAME)
                            .POST(HttpRequest.BodyPublishers.ofString(p.body()))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() / 100 != 2) {
                throw new IllegalStateException("provider answered " + r.statusCode() + " for " + p.paymentId());
            }
            boolean first = seenPayments.add(p.paymentId()); // for the log line only: the naive consumer never checks
            log(worker
                    + (first
                            ? " applied " + p.paymentId() + ": +$" + p.amount() + ", card charged"
                            : " applied " + p.paymentId() + " AGAIN: +$" + p.amount()
                                    + " too much, card charged again"));
            ack[i] = true;
        }
        return ack;
    }
}
