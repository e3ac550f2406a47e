package dev.once.examples.payments;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;

/** One accepted payment, keyed by the producer's event id. */
@Entity
public class Payment {
    @Id
    private String eventId;

    private String account;
    private long amount;

    protected Payment() {}

    public Payment(String eventId, String account, long amount) {
        this.eventId = eventId;
        this.account = account;
        this.amount = amount;
    }

    public String getEventId() {
        return eventId;
    }

    public String getAccount() {
        return account;
    }

    public long getAmount() {
        return amount;
    }
}
