/* biased_lock.h: a spinlock that the one thread using it takes without an atomic instruction.
 *
 * Most locks of a per-region table are only ever taken by one thread: glibc gives each thread
 * an arena of its own, and each arena its own heaps. The first thread to take such a lock
 * claims it (its "owner"); from then on the owner enters by announcing itself
 * (owner_inside = 1) and checking that it still owns the lock, with plain stores and loads.
 * Another thread that wants in takes the spinlock, takes the ownership away for good and
 * waits for the owner to leave. The owner's store and load can pass each other on the CPU
 * (store buffering); the other thread's heavy fence (membarrier's private expedited command)
 * makes every running thread of the process execute a full barrier, so either the owner sees
 * the ownership gone, or the other thread sees owner_inside set (Dekker's pattern with an
 * asymmetric fence).
 *
 * A lock taken away stays an ordinary spinlock (a lock that two threads use would pay a
 * system call each time it changed hands otherwise). Where membarrier is missing or refused,
 * no lock is ever claimed: ordinary spinlocks throughout. Not recursive; not for signal
 * handlers; fork safety is the owner's job as for hs_spinlock (hs_biased_hold below).
 */
#ifndef HEAPSCOPE_COMMON_BIASED_LOCK_H
#define HEAPSCOPE_COMMON_BIASED_LOCK_H

#include "spinlock.h"

#include <stdbool.h>
#include <stdint.h>

/* owner: HS_BIAS_UNCLAIMED (the next locker may claim it), HS_BIAS_OFF (an ordinary
 * spinlock) or the owning thread's token (hs_bias_self). */
#define HS_BIAS_UNCLAIMED ((uintptr_t)0)
#define HS_BIAS_OFF ((uintptr_t)1)

typedef struct {
    hs_spinlock lock;  /* what everybody but the owner takes */
    int owner_inside;  /* written by the owner only */
    uintptr_t owner;   /* atomic; changed only with lock held */
    uintptr_t held_owner; /* the owner while hs_biased_hold suspends it */
} hs_biased_lock;

#define HS_BIASED_LOCK_INIT {HS_SPINLOCK_INIT, 0, HS_BIAS_UNCLAIMED, HS_BIAS_UNCLAIMED}

/* A thread's token: the address of a thread-local variable (never 0 or 1). */
extern __thread char hs_bias_token __attribute__((tls_model("initial-exec")));

static inline uintptr_t hs_bias_self(void)
{
    return (uintptr_t)&hs_bias_token;
}

/* Enters as the owner: true when the calling thread owns l and is now inside; leave with
 * hs_biased_leave_owner. No atomic read-modify-write, no fence instruction. */
static inline bool hs_biased_enter_owner(hs_biased_lock *l)
{
    uintptr_t self = hs_bias_self();
    if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) != self || l->owner_inside)
        return false; /* not ours, or a re-entry (a signal handler): the general path */
    __atomic_store_n(&l->owner_inside, 1, __ATOMIC_RELAXED);
    /* Only the compiler is held back here: the other side's heavy fence orders the store
     * before the load on the CPU. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__builtin_expect(__atomic_load_n(&l->owner, __ATOMIC_ACQUIRE) == self, 1))
        return true;
    __atomic_store_n(&l->owner_inside, 0, __ATOMIC_RELEASE);
    return false;
}

static inline void hs_biased_leave_owner(hs_biased_lock *l)
{
    __atomic_store_n(&l->owner_inside, 0, __ATOMIC_RELEASE);
}

/* Takes an ordinary (HS_BIAS_OFF) lock without waiting; false when it is busy, or claimed
 * or claimable (hs_biased_take handles those). Leave with hs_spin_unlock(&l->lock). */
static inline bool hs_biased_trylock_off(hs_biased_lock *l)
{
    if (!hs_spin_trylock_fast(&l->lock))
        return false;
    if (__builtin_expect(__atomic_load_n(&l->owner, __ATOMIC_RELAXED) == HS_BIAS_OFF, 1))
        return true;
    hs_spin_unlock(&l->lock);
    return false;
}

/* Takes l, waiting if needed: true when entered as its owner (leave with
 * hs_biased_leave_owner), false with l->lock held (leave with hs_spin_unlock). Claims an
 * unclaimed lock for the caller, and takes a lock owned by another thread away from it. */
bool hs_biased_take(hs_biased_lock *l);

static inline void hs_biased_unlock(hs_biased_lock *l, bool as_owner)
{
    if (as_owner)
        hs_biased_leave_owner(l);
    else
        hs_spin_unlock(&l->lock);
}

/* Holding many locks at once (fork, a listing of every region): hs_biased_hold takes each
 * lock's spinlock and suspends its owner; then one hs_biased_fence for them all; then
 * hs_biased_hold_wait on each for its owner to leave. hs_biased_release gives the ownership
 * back and unlocks. hs_biased_hold returns whether the fence and wait are needed. */
bool hs_biased_hold(hs_biased_lock *l);
void hs_biased_hold_wait(hs_biased_lock *l);
void hs_biased_release(hs_biased_lock *l);

/* The heavy side's fence: every running thread of the process executes a full barrier. */
void hs_biased_fence(void);

/* Whether locks may be claimed in this process (membarrier registered); tests turn it off
 * to compare with ordinary spinlocks. */
bool hs_biased_enabled(void);
void hs_biased_disable(void);

/* Makes hs_biased_fence use its fallback (a page protection change) from now on, as it does
 * by itself when membarrier fails after registration: for tests. */
void hs_biased_fence_fallback(void);

#endif
