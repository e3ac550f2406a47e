/*
 * once: claim -> effect -> commit -> ack, checked by SPIN.
 * Two events, three consumers (so two deliveries of one event can run at once), a broker that
 * redelivers every unacknowledged event any number of times, to any consumer, also while an
 * earlier delivery is still being processed; a crash (or a lost connection, or a rolled-back
 * handler) at every step; a commit whose reply is lost (committed, but the consumer does not know).
 * The mapping of each step to the Java classes is in claim.md.
 *
 * Invariant: every acknowledged event's effect is applied exactly once, and none twice.
 * -DACK_BEFORE_COMMIT breaks the rule on purpose (ack, then claim and commit), checked only by the
 * audit at the end so the trail shows the whole story: acknowledged, crashed, never redelivered, lost.
 */
#define EVENTS 2
#define CONSUMERS 3

/* The database, committed state: the inbox rows and the applications of each event's effect. */
byte inbox[EVENTS];
byte effect[EVENTS];
/* The uncommitted claim: which transaction holds the unique-index entry of the event (0 = none). */
byte lockHolder[EVENTS];
/* The broker: acknowledged events are never delivered again. */
bool acked[EVENTS];

inline rollback() {
    atomic {
        if
        :: lockHolder[e] == _pid -> lockHolder[e] = 0
        :: else -> skip
        fi
    }
}

/* A crash, a dropped connection or a failed handler here rolls the transaction back: no ack, redelivery. */
#define CRASH_POINT if :: true -> skip :: true -> rollback(); goto next fi

inline ack() {
    atomic {
#ifndef ACK_BEFORE_COMMIT
        assert(effect[e] == 1);   /* an acknowledged event's effect is applied */
#endif
        acked[e] = true
    }
}

proctype Consumer() {
    byte e;
    bool claimed;
next:
    claimed = false;
    /* Receive: any unacknowledged event, possibly one another consumer is processing right now. */
end_receive:
    atomic {
        if
        :: !acked[0] -> e = 0
        :: !acked[1] -> e = 1
        fi
    }
#ifdef ACK_BEFORE_COMMIT
    ack();
#endif
    /* Begin; claim: INSERT ... ON CONFLICT DO NOTHING on (consumer, event_id). */
    if
    :: atomic {
           lockHolder[e] == 0 ->   /* a concurrent duplicate waits on the unique index */
           if
           :: inbox[e] == 1 -> claimed = false           /* conflict: DUPLICATE */
           :: else -> lockHolder[e] = _pid; claimed = true
           fi
       }
    :: atomic { lockHolder[e] != 0 && lockHolder[e] != _pid -> goto next }   /* lock timeout: IN_PROGRESS, no ack */
    fi;
    if
    :: !claimed ->
        CRASH_POINT;   /* crash before the duplicate's ack: redelivered, a duplicate again */
        goto acknowledge
    :: claimed -> skip
    fi;
    CRASH_POINT;       /* crash after the claim, before the handler */
    /* The handler's effect, written in the same transaction (uncommitted until the commit). */
    CRASH_POINT;       /* crash, lost connection or handler failure after the effect: rolled back */
    /* Commit: the claim and the effect become durable together and the index entry is released. */
    atomic {
        inbox[e] = 1;
        effect[e]++;
        lockHolder[e] = 0;
        assert(effect[e] <= 1)   /* never applied twice */
    }
    /* The commit reply is lost or the consumer crashes now: committed, not acknowledged, redelivered. */
    if
    :: true -> goto next
    :: true -> skip
    fi;
acknowledge:
#ifndef ACK_BEFORE_COMMIT
    ack();
#endif
    goto next
}

/* When nothing can move any more (every event acknowledged), check no acknowledged event is lost. */
active proctype Audit() {
end_audit:
    timeout ->
    assert(!acked[0] || effect[0] == 1);
    assert(!acked[1] || effect[1] == 1)
}

init {
    atomic {
        byte i = 0;
        do
        :: i < CONSUMERS -> run Consumer(); i++
        :: else -> break
        od
    }
}
