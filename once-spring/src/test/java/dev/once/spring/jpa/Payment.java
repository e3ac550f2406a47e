package dev.once.spring.jpa;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

/** A JPA entity written by the handler. */
@Entity
@Table(name = "payment")
public class Payment {
    @Id
    private String id;

    private long amount;

    protected Payment() {}

    public Payment(String id, long amount) {
        this.id = id;
        this.amount = amount;
    }

    public String getId() {
        return id;
    }

    public long getAmount() {
        return amount;
    }
}
