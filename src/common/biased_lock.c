/* biased_lock.c: the general paths of the biased lock (see biased_lock.h). */
#include "biased_lock.h"

#include "hs_assert.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread char hs_bias_token __attribute__((tls_model("initial-exec")));

/* 0: not asked yet; 1: membarrier's private expedited command is registered; -1: no claims. */
static int g_state;
/* Set once the fence's system call failed after all (a seccomp filter installed later): the
 * page-protection fence from then on. */
static int g_fence_by_mprotect;

static long membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

bool hs_biased_enabled(void)
{
    int s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s == 0, 0)) {
        /* Registering twice (two threads at once) is harmless. Registration is kept across
         * fork, and dropped by exec along with this library. */
        long q = membarrier(MEMBARRIER_CMD_QUERY);
        s = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
                ? 1
                : -1;
        int expected = 0;
        if (!__atomic_compare_exchange_n(&g_state, &expected, s, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            s = expected; /* disabled meanwhile: that stands */
    }
    return s > 0;
}

void hs_biased_disable(void)
{
    __atomic_store_n(&g_state, -1, __ATOMIC_RELEASE);
}

void hs_biased_fence_fallback(void)
{
    __atomic_store_n(&g_fence_by_mprotect, 1, __ATOMIC_RELAXED);
}

/* Changing a present page's protection makes the kernel interrupt every CPU that runs a
 * thread of the process to flush its TLB, and the interrupt is a full barrier there (x86;
 * the fallback .NET used before membarrier). */
static void fence_by_mprotect(void)
{
    static char *page;
    static hs_spinlock lock = HS_SPINLOCK_INIT;
    hs_spin_lock(&lock);
    if (!page) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        hs_assert(p != MAP_FAILED);
        page = p;
    }
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
    __atomic_store_n(page, 1, __ATOMIC_RELAXED); /* present, so that there is a TLB entry */
    mprotect(page, 4096, PROT_NONE);
    hs_spin_unlock(&lock);
}

void hs_biased_fence(void)
{
    /* With one thread there is nobody to order against. */
    if (__libc_single_threaded)
        return;
    hs_assert(__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) > 0); /* only claimed locks fence */
    if (!__atomic_load_n(&g_fence_by_mprotect, __ATOMIC_RELAXED) &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    __atomic_store_n(&g_fence_by_mprotect, 1, __ATOMIC_RELAXED);
    fence_by_mprotect();
}

/* Waits for the owner to leave (l->lock held, the ownership already gone, fence done). */
void hs_biased_hold_wait(hs_biased_lock *l)
{
    for (unsigned spins = 0; __atomic_load_n(&l->owner_inside, __ATOMIC_ACQUIRE); spins++) {
        if (spins < 64)
            __builtin_ia32_pause();
        else
            sched_yield(); /* the owner may be preempted inside */
    }
}

bool hs_biased_take(hs_biased_lock *l)
{
    if (hs_biased_enter_owner(l))
        return true;
    hs_spin_lock(&l->lock);
    uintptr_t owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
    if (owner == HS_BIAS_UNCLAIMED) {
        /* This entry goes on under the spinlock; the next one by this thread as the owner. */
        __atomic_store_n(&l->owner, hs_biased_enabled() ? hs_bias_self() : HS_BIAS_OFF,
                         __ATOMIC_RELAXED);
    } else if (owner != HS_BIAS_OFF) {
        /* Another thread's (or this thread's, re-entered from a signal handler while inside:
         * that waits for good, as an ordinary spinlock would). */
        __atomic_store_n(&l->owner, HS_BIAS_OFF, __ATOMIC_RELAXED);
        hs_biased_fence();
        hs_biased_hold_wait(l);
    }
    return false;
}

bool hs_biased_hold(hs_biased_lock *l)
{
    hs_spin_lock(&l->lock);
    uintptr_t owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
    l->held_owner = owner;
    if (owner == HS_BIAS_UNCLAIMED || owner == HS_BIAS_OFF)
        return false;
    __atomic_store_n(&l->owner, HS_BIAS_OFF, __ATOMIC_RELAXED);
    return true;
}

void hs_biased_release(hs_biased_lock *l)
{
    /* Release order: what the holder wrote is seen by the owner's acquire load of owner. */
    __atomic_store_n(&l->owner, l->held_owner, __ATOMIC_RELEASE);
    hs_spin_unlock(&l->lock);
}
