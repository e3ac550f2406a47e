/*
 * Lease + fencing token, checked by SPIN. Two holders compete for one lease; every acquisition
 * increments the token; a holder may pause for any length of time anywhere (a GC pause, SIGSTOP)
 * while the lease expires and the other takes it over. The protected resource accepts a write
 * only if its token is not older than the newest it accepted, checked and recorded in the same
 * transaction as the write (once_fence row lock). The mapping to the Java classes is in lease.md.
 *
 * Invariant: an accepted write never carries an older token than one accepted before it, so a
 * paused holder's write after its successor's is rejected.
 *
 *   -DUNFENCED          the holder checks that it still holds the lease, then writes (check-then-act)
 *   -DFENCE_OUTSIDE_TX  the fence is checked in one transaction and the write made in another
 */
#define HOLDERS 2
#define MAX_TOKEN 4

byte token = 0;          /* once_lease.token: incremented by every acquisition */
byte owner = 0;          /* once_lease.owner; 0 once the lease expired or was released */
byte fenceNewest = 0;    /* once_fence: newest token accepted for the resource */
byte lastWrite = 0;      /* ghost: the token of the last write the resource accepted */
byte accepted = 0;       /* ghost: how many writes it accepted */

proctype Holder() {
    byte mine;
    bool ok;
end_acquire:
    do
    :: atomic { owner == 0 && token < MAX_TOKEN -> token++; owner = _pid; mine = token }
       /* ... work, with a pause anywhere ... */
#ifdef UNFENCED
       ok = (owner == _pid);                  /* "am I still the holder?" */
       if
       :: ok -> atomic { assert(mine >= lastWrite); lastWrite = mine; accepted++ }
       :: else -> skip
       fi;
#elif defined(FENCE_OUTSIDE_TX)
       atomic { ok = (mine >= fenceNewest); if :: ok -> fenceNewest = mine :: else -> skip fi }
       if
       :: ok -> atomic { assert(mine >= lastWrite); lastWrite = mine; accepted++ }
       :: else -> skip
       fi;
#else
       /* Fence.check and the write, one transaction serialized by the fence row. */
       atomic {
           if
           :: mine >= fenceNewest ->
               fenceNewest = mine;
               assert(mine >= lastWrite);
               lastWrite = mine;
               accepted++
           :: else -> skip   /* StaleFencingTokenException: rolled back */
           fi
       }
#endif
       atomic { if :: owner == _pid -> owner = 0 :: else -> skip fi }   /* release */
    od
}

/* Time passes: the current lease may expire at any moment, whatever its holder is doing. */
proctype Expiry() {
end_expiry:
    do
    :: atomic { owner != 0 -> owner = 0 }
    od
}

init {
    atomic {
        byte i = 0;
        do
        :: i < HOLDERS -> run Holder(); i++
        :: else -> break
        od;
        run Expiry()
    }
}
