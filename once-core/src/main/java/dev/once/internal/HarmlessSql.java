package dev.once.internal;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The handler SQL strings of one consumer that its guard has read and found harmless: no transaction
 * control, no first word the watch acts on ({@code SAVEPOINT}, {@code ROLLBACK TO}, {@code CALL},
 * {@code EXECUTE}), no mention of the inbox. What the guard decides depends only on the string, the
 * dialect's lexing and the inbox's name, all fixed per consumer, so a string seen once needs no second
 * read: a {@code JdbcTemplate} body passes the same string on every event, and the read was most of the
 * guard's cost per statement (issue 21). Bounded, so SQL built per event (values inlined) cannot grow it:
 * beyond the bound, or for a long string, the guard simply reads again. Thread-safe. Not API.
 */
public final class HarmlessSql {

    private static final int MAX_STRINGS = 1024;
    private static final int MAX_LENGTH = 4096;

    private final Set<String> known = ConcurrentHashMap.newKeySet();

    /** Empty: one per consumer. */
    public HarmlessSql() {}

    boolean contains(String sql) {
        return sql != null && known.contains(sql);
    }

    void add(String sql) {
        if (sql.length() <= MAX_LENGTH && known.size() < MAX_STRINGS) {
            known.add(sql);
        }
    }
}
