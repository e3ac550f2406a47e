/*
 * The two consumers once replaces, checked by SPIN against the same invariant as claim.pml:
 * every acknowledged event's effect applied exactly once, none twice. Both must fail, and SPIN
 * prints the counterexample trail. The mapping to the README's attempts is in naive.md.
 *
 *   -DNAIVE           apply the effect and commit, then ack (the README's attempt 1)
 *   -DCHECK_THEN_ACT  SELECT the processed marker, and if absent apply the effect and insert the
 *                     marker in one transaction, with no unique constraint (attempt 2)
 */
#define EVENTS 2
#define CONSUMERS 2

byte processed[EVENTS];   /* the check-then-act marker table, no unique key */
byte effect[EVENTS];
bool acked[EVENTS];

inline ack() {
    atomic {
        assert(effect[e] == 1);
        acked[e] = true
    }
}

proctype Consumer() {
    byte e;
    bool seen;
next:
end_receive:
    atomic {
        if
        :: !acked[0] -> e = 0
        :: !acked[1] -> e = 1
        fi
    }
#ifdef NAIVE
    /* Apply and commit the effect. */
    atomic { effect[e]++; assert(effect[e] <= 1) }
    /* Crash between the commit and the ack (the ack gap): redelivered. */
    if :: true -> goto next :: true -> skip fi;
    ack();
#endif
#ifdef CHECK_THEN_ACT
    /* SELECT 1 FROM processed WHERE event_id = ?  -- no lock, decides nothing safely */
    seen = processed[e];
    if
    :: seen -> ack(); goto next
    :: else -> skip
    fi;
    /* INSERT the marker and apply the effect in one transaction: both commit, nothing conflicts. */
    atomic { processed[e] = 1; effect[e]++; assert(effect[e] <= 1) }
    if :: true -> goto next :: true -> skip fi;
    ack();
#endif
    goto next
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
