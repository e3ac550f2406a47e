package dev.once.cli.demo;

/**
 * Every statement of the demo, in one place: its two ledgers (the business tables of the two
 * lanes). PostgreSQL only, like the demo.
 */
final class DemoSql {

    private DemoSql() {}

    static final String CREATE_NAIVE_LEDGER =
            "CREATE TABLE naive_ledger (id bigserial PRIMARY KEY, event_id varchar(255) NOT NULL,"
                    + " payment_id varchar(255) NOT NULL, amount integer NOT NULL, worker varchar(50) NOT NULL,"
                    + " applied_at timestamptz NOT NULL DEFAULT now())";

    // No unique constraint on purpose: the ledger is a balance update in spirit (seed 003), so
    // there is no business row to carry one; the once lane's dedupe is the inbox claim.
    static final String CREATE_ONCE_LEDGER =
            "CREATE TABLE once_ledger (id bigserial PRIMARY KEY, event_id varchar(255) NOT NULL,"
                    + " payment_id varchar(255) NOT NULL, amount integer NOT NULL, worker varchar(50) NOT NULL,"
                    + " applied_at timestamptz NOT NULL DEFAULT now())";

    /** Binds: 1 event id, 2 payment id, 3 amount, 4 worker. */
    static String credit(String ledger) {
        return "INSERT INTO " + ledger + " (event_id, payment_id, amount, worker) VALUES (?, ?, ?, ?)";
    }

    /** Columns: balance, the balance if each payment counted once, entries. */
    static String balance(String ledger) {
        return "SELECT coalesce(sum(amount), 0),"
                + " (SELECT coalesce(sum(amount), 0) FROM (SELECT DISTINCT payment_id, amount FROM " + ledger + ") d),"
                + " count(*) FROM " + ledger;
    }
}
