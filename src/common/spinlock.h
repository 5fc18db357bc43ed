/* spinlock.h: a small test-and-test-and-set lock for the tools' internal tables.
 *
 * Used where a pthread mutex cannot be: inside malloc before libc is up, and where the
 * critical sections are a few dozen instructions (hash table updates). Waiters yield the CPU
 * after a short spin so a preempted holder is not starved on a 2-core machine. Not
 * recursive; not for use in signal handlers. Fork safety is the owner's job: take every lock
 * in a pthread_atfork prepare handler and release them in the parent and child handlers.
 */
#ifndef HEAPSCOPE_COMMON_SPINLOCK_H
#define HEAPSCOPE_COMMON_SPINLOCK_H

#include <sched.h>
#include <stdbool.h>
#include <sys/single_threaded.h>

typedef struct {
    int locked;
} hs_spinlock;

#define HS_SPINLOCK_INIT                                                                           \
    {                                                                                              \
        0                                                                                          \
    }

static inline bool hs_spin_trylock(hs_spinlock *l)
{
    return !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE);
}

/* The same, without the atomic exchange while the process has a single thread (glibc's
 * __libc_single_threaded, which glibc's own malloc relies on in the same way): nobody else can
 * hold or want the lock then. A lock the thread itself holds is still seen as taken. For the
 * hottest paths (malloc debug's pointer table). */
static inline bool hs_spin_trylock_fast(hs_spinlock *l)
{
    if (__libc_single_threaded) {
        if (l->locked)
            return false;
        l->locked = 1;
        __atomic_signal_fence(__ATOMIC_ACQUIRE);
        return true;
    }
    return hs_spin_trylock(l);
}

static inline void hs_spin_lock(hs_spinlock *l)
{
    if (__builtin_expect(hs_spin_trylock(l), 1))
        return;
    for (unsigned spins = 0;; spins++) {
        while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
            if (++spins < 64)
                __builtin_ia32_pause();
            else
                sched_yield();
        }
        if (hs_spin_trylock(l))
            return;
    }
}

static inline void hs_spin_unlock(hs_spinlock *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif
