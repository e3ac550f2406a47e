/*
 * once inside a transaction it does not own, checked by SPIN: savepoints (Spring NESTED, JDBC
 * setSavepoint), suspension (REQUIRES_NEW: the outer transaction waits while an inner one runs) and
 * joined outcomes (reported when the physical transaction ends).
 * One caller thread does any sequence of: savepoint; rollback to any live savepoint; release of one
 * (announced, as JDBC's ManualTransactions does, or not, as Spring's NESTED commit); process (claim +
 * effect + an outcome callback); outbox add; an early flush of the buffer (Outbox.FLUSH_ROWS, the end
 * of a handler); suspend the outer transaction for a REQUIRES_NEW one and end that; at last commit or
 * roll back the outer one. once's state of a transaction (PhysicalTransaction) is made at begin or on
 * first use, so savepoints set before it are unknown to it; the outbox writer is made on first add.
 * Two sides are kept apart: the database, where each write sits at the savepoint level it was made
 * at (a rollback to savepoint d drops what is above d, a release of d moves it down to d), with a
 * ghost INTENT write where the caller added a message, so "what the caller meant to send" is undone
 * by the same rollbacks as the data; and once's mechanism (JoinedTransaction, OutboxBuffer), which
 * decides which rows are written and what is reported. The mapping to the Java classes is in joined.md.
 *
 * Invariants: a message is sent (its row committed) exactly when its add committed (no phantom,
 * none lost) and never twice; every outcome reported when a transaction ends says "applied" exactly
 * when the event's claim and effect committed; the buffer never drops a row it must write again.
 * Mutants: -DBUFFER_NO_SAVEPOINTS (the buffer ignores savepoints), -DOUTCOME_FROM_OUTER_COMMIT
 * (callbacks hear how the outer transaction ended, not whether their work survived its savepoints),
 * -DSHARED_ON_SUSPEND (once's state stays bound while a REQUIRES_NEW transaction runs).
 */
#define T 2          /* physical transactions: the outer one and one REQUIRES_NEW inner one */
#ifndef SPN
#define SPN 2        /* savepoints set in all (ids 1..SPN), so also live at once */
#endif
#ifndef EVENTS
#define EVENTS 1
#endif
#ifndef MSGS
#define MSGS 2
#endif
#ifndef SUSPENDS
#define SUSPENDS 1
#endif
#define START 7      /* PhysicalTransaction's "start" sentinel savepoint */
#define NONE 255     /* not written, or undone */

typedef Tx {
    /* the database: live savepoints, oldest first */
    byte spDepth;
    byte spId[SPN];
    /* once: PhysicalTransaction (registered with this transaction when made) */
    bool state;
    byte knownMask;          /* PhysicalTransaction.savepoints: the ids announced to it */
    /* JoinedTransaction: callbacks, and its savepoints (START first) with the callbacks registered before each */
    byte ncb;
    byte cbEvent[EVENTS];
    bool cbUndone[EVENTS];
    byte jn;
    byte jSp[SPN + 1];
    byte jPos[SPN + 1];
    /* OutboxBuffer: rows numbered from 0 in the order added, total = base + rows.size() */
    bool buf;
    byte total;
    byte rowMsg[MSGS];
    byte base;
    byte written;
    byte liveN;              /* live marks (by savepoint id), oldest first */
    byte live[SPN + 1];
    bool hasMark[8];         /* marks, by savepoint id */
    byte markAdded[8];
    byte markWritten[8];
}

Tx tx[T];
/* the database's uncommitted writes: which transaction, at which savepoint level (NONE: none) */
byte claimTx[EVENTS];
byte claimLvl[EVENTS];
byte intentTx[MSGS];
byte intentLvl[MSGS];
byte rowTx[MSGS];
byte rowLvl[MSGS];
/* committed */
byte applied[EVENTS];
byte sent[MSGS];
bool intended[MSGS];

byte cur;                    /* the transaction the caller runs in */
byte nextSp = 1;
byte nextEvent;
byte nextMsg;
bool suspendedOnce;
byte i, j, at, id, t, m, keep, ma, mw;   /* scratch, zeroed after each step */

/* The once state an operation in transaction x uses: its own, or with the mutant the suspended one's. */
inline owner(x, o) {
#ifdef SHARED_ON_SUSPEND
    if
    :: x == 1 && tx[0].state -> o = 0
    :: else -> o = x
    fi
#else
    o = x
#endif
}

inline ensureState(o) {
    if
    :: !tx[o].state ->
        tx[o].state = true;
        tx[o].jSp[0] = START; tx[o].jPos[0] = 0; tx[o].jn = 1   /* joined.savepoint(start) */
    :: else -> skip
    fi
}

/* OutboxBuffer.trim: drops written rows no live savepoint can bring back. */
inline trim(o) {
    keep = tx[o].written;
    for (i : 0 .. tx[o].liveN - 1) {
        if
        :: tx[o].markWritten[tx[o].live[i]] < keep -> keep = tx[o].markWritten[tx[o].live[i]]
        :: else -> skip
        fi
    }
    if
    :: keep > tx[o].base -> tx[o].base = keep
    :: else -> skip
    fi
}

inline bufSavepoint(o, s) {
#ifndef BUFFER_NO_SAVEPOINTS
    tx[o].hasMark[s] = true;
    tx[o].markAdded[s] = tx[o].total;
    tx[o].markWritten[s] = tx[o].written;
    tx[o].live[tx[o].liveN] = s;
    tx[o].liveN++
#else
    skip
#endif
}

inline bufRollback(o, s) {
#ifndef BUFFER_NO_SAVEPOINTS
    at = NONE;
    if
    :: tx[o].hasMark[s] ->
        for (i : 0 .. tx[o].liveN - 1) {
            if :: tx[o].live[i] == s -> at = i :: else -> skip fi
        }
    :: else -> skip
    fi;
    if
    :: at == NONE -> ma = 0; mw = 0; tx[o].liveN = 0          /* unknown: Mark(0, 0), everything undone */
    :: else -> ma = tx[o].markAdded[s]; mw = tx[o].markWritten[s]; tx[o].liveN = at + 1
    fi;
    if
    :: ma >= tx[o].base -> if :: ma < tx[o].total -> tx[o].total = ma :: else -> skip fi
    :: else -> tx[o].base = ma; tx[o].total = ma   /* only Mark(0, 0): rows.clear(), numbered from it */
    fi;
    if :: mw < tx[o].written -> tx[o].written = mw :: else -> skip fi;
    assert(tx[o].written >= tx[o].base);   /* never a row to write again that was dropped from memory */
    trim(o)
#else
    skip
#endif
}

inline bufRelease(o, s) {
#ifndef BUFFER_NO_SAVEPOINTS
    if
    :: tx[o].hasMark[s] ->
        tx[o].hasMark[s] = false;
        at = NONE;
        for (i : 0 .. tx[o].liveN - 1) {
            if :: tx[o].live[i] == s -> at = i :: else -> skip fi
        }
        if
        :: at != NONE -> tx[o].liveN = at; trim(o)
        :: else -> skip
        fi
    :: else -> skip
    fi
#else
    skip
#endif
}

/* OutboxBuffer.flush: writes the rows not yet written on the buffer's own transaction's connection. */
inline flush(o) {
    for (i : tx[o].written .. tx[o].total - 1) {
        assert(i >= tx[o].base);
        m = tx[o].rowMsg[i];
        assert(rowLvl[m] == NONE);   /* never two rows of one message */
        rowTx[m] = o;
        rowLvl[m] = tx[o].spDepth
    }
    tx[o].written = tx[o].total;
    trim(o)
}

/* Transaction x sets a savepoint: the database's, then Spring's savepoint(...) to once's state. */
inline savepoint(x) {
    id = nextSp;
    nextSp++;
    tx[x].spId[tx[x].spDepth] = id;
    tx[x].spDepth++;
    if
    :: tx[x].state ->
        tx[x].knownMask = tx[x].knownMask | (1 << id);
        tx[x].jSp[tx[x].jn] = id;
        tx[x].jPos[tx[x].jn] = tx[x].ncb;
        tx[x].jn++;
        if :: tx[x].buf -> bufSavepoint(x, id) :: else -> skip fi
    :: else -> skip
    fi
}

/* The database drops the writes of x above level d; then PhysicalTransaction.savepointRollback. */
inline rollbackTo(x, d) {
    for (j : 0 .. EVENTS - 1) {
        if :: claimTx[j] == x && claimLvl[j] != NONE && claimLvl[j] > d -> claimLvl[j] = NONE :: else -> skip fi
    }
    for (j : 0 .. MSGS - 1) {
        if :: intentTx[j] == x && intentLvl[j] != NONE && intentLvl[j] > d -> intentLvl[j] = NONE :: else -> skip fi;
        if :: rowTx[j] == x && rowLvl[j] != NONE && rowLvl[j] > d -> rowLvl[j] = NONE :: else -> skip fi
    }
    id = tx[x].spId[d];
    tx[x].spDepth = d + 1;
    if
    :: tx[x].state ->
        /* an unknown savepoint is one set before the state: a rollback to its start */
        if :: (tx[x].knownMask & (1 << id)) == 0 -> id = START :: else -> skip fi;
        /* JoinedTransaction.rollbackToSavepoint */
        at = NONE;
        for (j : 0 .. tx[x].jn - 1) {
            if :: tx[x].jSp[j] == id -> at = j :: else -> skip fi
        }
        assert(at != NONE);   /* it throws on a savepoint it was never told of */
        for (j : tx[x].jPos[at] .. tx[x].ncb - 1) {
            tx[x].cbUndone[j] = true
        }
        tx[x].jn = at + 1;
        if :: tx[x].buf -> bufRollback(x, id) :: else -> skip fi
    :: else -> skip
    fi
}

/* The database merges the writes of x above level d into d; once hears of it only if announced. */
inline release(x, d, announced) {
    for (j : 0 .. EVENTS - 1) {
        if :: claimTx[j] == x && claimLvl[j] != NONE && claimLvl[j] > d -> claimLvl[j] = d :: else -> skip fi
    }
    for (j : 0 .. MSGS - 1) {
        if :: intentTx[j] == x && intentLvl[j] != NONE && intentLvl[j] > d -> intentLvl[j] = d :: else -> skip fi;
        if :: rowTx[j] == x && rowLvl[j] != NONE && rowLvl[j] > d -> rowLvl[j] = d :: else -> skip fi
    }
    id = tx[x].spId[d];
    tx[x].spDepth = d;
    if
    :: tx[x].state && announced ->   /* JoinedTransaction.releaseSavepoint, forwarded to the buffer */
        at = NONE;
        for (j : 0 .. tx[x].jn - 1) {
            if :: tx[x].jSp[j] == id -> at = j :: else -> skip fi
        }
        if :: at != NONE -> tx[x].jn = at :: else -> skip fi;
        if :: tx[x].buf -> bufRelease(x, id) :: else -> skip fi
    :: else -> skip
    fi
}

/* process(): the claim and the effect in the caller's transaction, the outcome callback with once's state. */
inline process(x) {
    claimTx[nextEvent] = x;
    claimLvl[nextEvent] = tx[x].spDepth;
    owner(x, t);
    ensureState(t);
    tx[t].cbEvent[tx[t].ncb] = nextEvent;
    tx[t].cbUndone[tx[t].ncb] = false;
    tx[t].ncb++;
    nextEvent++
}

/* outbox().add / OnceOutbox.add: buffered by once's writer; the ghost INTENT marks the caller's act. */
inline add(x) {
    intentTx[nextMsg] = x;
    intentLvl[nextMsg] = tx[x].spDepth;
    owner(x, t);
    ensureState(t);
    tx[t].buf = true;
    tx[t].rowMsg[tx[t].total] = nextMsg;
    tx[t].total++;
    nextMsg++
}

/* The end of physical transaction x: beforeCommit flushes, the database commits or not, afterCompletion reports. */
inline complete(x, commit) {
    if :: commit && tx[x].state && tx[x].buf -> flush(x) :: else -> skip fi;
    for (j : 0 .. EVENTS - 1) {
        if
        :: claimTx[j] == x && claimLvl[j] != NONE ->
            if :: commit -> applied[j]++ :: else -> skip fi;
            claimLvl[j] = NONE
        :: else -> skip
        fi
    }
    for (j : 0 .. MSGS - 1) {
        if
        :: intentTx[j] == x && intentLvl[j] != NONE ->
            intended[j] = commit;
            intentLvl[j] = NONE
        :: else -> skip
        fi;
        if
        :: rowTx[j] == x && rowLvl[j] != NONE ->
            if :: commit -> sent[j]++ :: else -> skip fi;
            rowLvl[j] = NONE
        :: else -> skip
        fi
    }
    if
    :: tx[x].state ->
        for (j : 0 .. tx[x].ncb - 1) {
            m = tx[x].cbEvent[j];
#ifdef OUTCOME_FROM_OUTER_COMMIT
            assert(commit == (applied[m] == 1))   /* the outcome says what committed */
#else
            assert((commit && !tx[x].cbUndone[j]) == (applied[m] == 1))   /* the outcome says what committed */
#endif
        }
    :: else -> skip
    fi
}

/* Forgets what no longer matters (scratch variables, entries past each list's end, an ended
 * transaction's state), so that equal states are stored once. */
inline tidy() {
    for (t : 0 .. T - 1) {
        for (j : tx[t].spDepth .. SPN - 1) { tx[t].spId[j] = 0 }
        for (j : tx[t].jn .. SPN) { tx[t].jSp[j] = 0; tx[t].jPos[j] = 0 }
        for (j : tx[t].liveN .. SPN) { tx[t].live[j] = 0 }
        for (j : tx[t].total .. MSGS - 1) { tx[t].rowMsg[j] = 0 }
        for (j : 0 .. 7) {
            if :: !tx[t].hasMark[j] -> tx[t].markAdded[j] = 0; tx[t].markWritten[j] = 0 :: else -> skip fi
        }
    }
    for (j : 0 .. EVENTS - 1) {
        if :: claimLvl[j] == NONE -> claimTx[j] = 0 :: else -> skip fi
    }
    for (j : 0 .. MSGS - 1) {
        if :: intentLvl[j] == NONE -> intentTx[j] = 0 :: else -> skip fi;
        if :: rowLvl[j] == NONE -> rowTx[j] = 0 :: else -> skip fi
    }
    i = 0; j = 0; at = 0; id = 0; t = 0; m = 0; keep = 0; ma = 0; mw = 0
}

inline forget(x) {
    tx[x].spDepth = 0; tx[x].state = false; tx[x].knownMask = 0; tx[x].ncb = 0; tx[x].jn = 0;
    for (j : 0 .. EVENTS - 1) { tx[x].cbEvent[j] = 0; tx[x].cbUndone[j] = false }
    tx[x].buf = false; tx[x].total = 0; tx[x].base = 0; tx[x].written = 0; tx[x].liveN = 0;
    for (j : 0 .. 7) { tx[x].hasMark[j] = false }
}

init {
    d_step {
        for (j : 0 .. EVENTS - 1) { claimLvl[j] = NONE }
        for (j : 0 .. MSGS - 1) { intentLvl[j] = NONE; rowLvl[j] = NONE }
        j = 0
    };
    do
    :: !tx[cur].state -> d_step { ensureState(cur); tidy() }   /* made at begin (ManualTransactions.join) */
    :: nextSp <= SPN -> d_step { savepoint(cur); tidy() }
    /* roll back to, or release, any live savepoint (up to 3) */
    :: tx[cur].spDepth > 0 -> d_step { rollbackTo(cur, 0); tidy() }
    :: tx[cur].spDepth > 1 -> d_step { rollbackTo(cur, 1); tidy() }
    :: tx[cur].spDepth > 2 -> d_step { rollbackTo(cur, 2); tidy() }
    :: tx[cur].spDepth > 0 -> d_step { release(cur, 0, true); tidy() }
    :: tx[cur].spDepth > 1 -> d_step { release(cur, 1, true); tidy() }
    :: tx[cur].spDepth > 2 -> d_step { release(cur, 2, true); tidy() }
    :: tx[cur].spDepth > 0 -> d_step { release(cur, 0, false); tidy() }
    :: tx[cur].spDepth > 1 -> d_step { release(cur, 1, false); tidy() }
    :: tx[cur].spDepth > 2 -> d_step { release(cur, 2, false); tidy() }
    :: nextEvent < EVENTS -> d_step { process(cur); tidy() }
    :: nextMsg < MSGS -> d_step { add(cur); tidy() }
    /* an early flush (Outbox.FLUSH_ROWS, or the engine's buffer at a handler's end) */
    :: d_step { owner(cur, t); if :: tx[t].buf && tx[t].written < tx[t].total -> flush(t) :: else -> skip fi; tidy() }
    :: SUSPENDS && cur == 0 && !suspendedOnce -> d_step { suspendedOnce = true; cur = 1 }   /* REQUIRES_NEW begins */
    :: cur == 1 -> d_step { complete(1, true); forget(1); cur = 0; tidy() }    /* the inner commits; the outer resumes */
    :: cur == 1 -> d_step { complete(1, false); forget(1); cur = 0; tidy() }   /* the inner rolls back */
    :: cur == 0 -> d_step { complete(0, true); tidy() }; break
    :: cur == 0 -> d_step { complete(0, false); tidy() }; break
    od;
    /* Quiescence: every message sent exactly when its add committed. */
    for (m : 0 .. MSGS - 1) {
        assert(sent[m] == intended[m])
    }
}
