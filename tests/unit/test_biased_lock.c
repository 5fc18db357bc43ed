/* Unit tests of the biased lock (src/common/biased_lock.[ch]): who owns a lock and when it is
 * taken away, holding every lock (fork, listings), and mutual exclusion between an owner
 * entering without atomics and another thread taking the lock away at a random moment, with
 * membarrier's fence and with the page-protection fallback. Also run under ThreadSanitizer
 * (make sanitize). */
#include "biased_lock.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(arg) on a new thread and waits for it. */
static void on_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, arg) == 0);
    pthread_join(t, NULL);
}

static void *take_and_release(void *arg)
{
    hs_biased_lock *l = arg;
    hs_biased_unlock(l, hs_biased_take(l));
    return NULL;
}

static void test_claim_then_owner_entry(void)
{
    check_context("the first taker owns the lock and enters without the spinlock");
    hs_biased_lock l = HS_BIASED_LOCK_INIT;
    CHECK(!hs_biased_enter_owner(&l)); /* unclaimed */
    CHECK(!hs_biased_trylock_off(&l)); /* claimable: left to hs_biased_take */
    CHECK(!hs_biased_take(&l));        /* claims, goes on under the spinlock */
    CHECK(l.lock.locked);
    CHECK_EQ(l.owner, hs_bias_self());
    hs_biased_unlock(&l, false);
    CHECK(hs_biased_enter_owner(&l));
    CHECK(!l.lock.locked && l.owner_inside);
    CHECK(!hs_biased_enter_owner(&l)); /* a re-entry is not let in */
    hs_biased_leave_owner(&l);
    CHECK(!l.owner_inside);
    CHECK(hs_biased_take(&l)); /* take enters as the owner too */
    hs_biased_unlock(&l, true);
}

static void test_another_thread_takes_it_away(void)
{
    check_context("another thread's take ends the ownership for good");
    hs_biased_lock l = HS_BIASED_LOCK_INIT;
    hs_biased_unlock(&l, hs_biased_take(&l));
    CHECK_EQ(l.owner, hs_bias_self());
    on_thread(take_and_release, &l);
    CHECK_EQ(l.owner, HS_BIAS_OFF);
    CHECK(!l.lock.locked);
    CHECK(!hs_biased_enter_owner(&l));
    CHECK(hs_biased_trylock_off(&l)); /* an ordinary spinlock now */
    CHECK(!hs_biased_trylock_off(&l));
    hs_spin_unlock(&l.lock);
    CHECK(!hs_biased_take(&l));
    hs_biased_unlock(&l, false);
    CHECK_EQ(l.owner, HS_BIAS_OFF);
}

struct owner_probe {
    hs_biased_lock *l;
    bool entered;
};

static void *claim(void *arg)
{
    struct owner_probe *o = arg;
    hs_biased_unlock(o->l, hs_biased_take(o->l));
    return NULL;
}

static void test_hold_suspends_and_gives_back(void)
{
    check_context("holding a lock suspends its owner; releasing gives the ownership back");
    hs_biased_lock l = HS_BIASED_LOCK_INIT;
    hs_biased_unlock(&l, hs_biased_take(&l));
    uintptr_t self = hs_bias_self();
    CHECK(hs_biased_hold(&l));
    hs_biased_fence();
    hs_biased_hold_wait(&l);
    CHECK(l.lock.locked);
    CHECK_EQ(l.owner, HS_BIAS_OFF);
    CHECK(!hs_biased_enter_owner(&l)); /* suspended, even for the owner */
    hs_biased_release(&l);
    CHECK_EQ(l.owner, self);
    CHECK(!l.lock.locked);
    CHECK(hs_biased_enter_owner(&l));
    hs_biased_leave_owner(&l);

    hs_biased_lock plain = HS_BIASED_LOCK_INIT;
    CHECK(!hs_biased_hold(&plain)); /* nobody to wait for */
    hs_biased_release(&plain);
    CHECK_EQ(plain.owner, HS_BIAS_UNCLAIMED);

    /* Another thread's lock, held from here: it is that thread's again afterwards. */
    hs_biased_lock theirs = HS_BIASED_LOCK_INIT;
    struct owner_probe o = {&theirs, false};
    on_thread(claim, &o);
    uintptr_t their_token = theirs.owner;
    CHECK(their_token != HS_BIAS_OFF && their_token != HS_BIAS_UNCLAIMED && their_token != self);
    CHECK(hs_biased_hold(&theirs));
    hs_biased_fence();
    hs_biased_hold_wait(&theirs);
    hs_biased_release(&theirs);
    CHECK_EQ(theirs.owner, their_token);
}

/* Mutual exclusion: the owner enters and leaves in a loop; another thread takes the lock
 * away after a random number of the owner's entries, then both go on with it as an ordinary
 * spinlock. Inside, a and b must be equal and every increment must count. */
struct race {
    hs_biased_lock lock;
    unsigned long a, b;
    unsigned long start_after; /* entries of the owner before the other thread takes it */
    int window;                /* length of the moment inside in which a != b */
    int ready; /* the other thread runs: the owner's loop starts */
    int started;
    int broken;
};

enum { RACE_ENTRIES = 1000, RACE_OTHER_ENTRIES = 100 };

static void enter_once(struct race *r)
{
    bool owner = hs_biased_take(&r->lock);
    unsigned long a = r->a;
    if (a != r->b)
        __atomic_store_n(&r->broken, 1, __ATOMIC_RELAXED);
    r->a = a + 1;
    for (volatile int i = 0; i < r->window; i++)
        ;
    r->b = a + 1;
    hs_biased_unlock(&r->lock, owner);
}

static void *race_owner(void *arg)
{
    struct race *r = arg;
    hs_biased_unlock(&r->lock, hs_biased_take(&r->lock)); /* claims it */
    while (!__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
    for (unsigned long i = 0; i < RACE_ENTRIES; i++) {
        if (i == r->start_after)
            __atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
        enter_once(r);
    }
    __atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *race_other(void *arg)
{
    struct race *r = arg;
    __atomic_store_n(&r->ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&r->started, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
    for (unsigned long i = 0; i < RACE_OTHER_ENTRIES; i++)
        enter_once(r);
    return NULL;
}

static void run_races(const char *what, unsigned rounds)
{
    check_context(what);
    unsigned long lost = 0, broken = 0, still_owned = 0;
    unsigned seed = 12345;
    for (unsigned round = 0; round < rounds; round++) {
        /* Short moments inside test the fence; moments longer than the fence's system call
         * test the wait for the owner to leave. */
        struct race r = {.lock = HS_BIASED_LOCK_INIT,
                         .start_after = rand_r(&seed) % RACE_ENTRIES,
                         .window = round % 2 ? 10 : 5000};
        pthread_t owner, other;
        CHECK(pthread_create(&owner, NULL, race_owner, &r) == 0);
        CHECK(pthread_create(&other, NULL, race_other, &r) == 0);
        pthread_join(owner, NULL);
        pthread_join(other, NULL);
        lost += r.a != RACE_ENTRIES + RACE_OTHER_ENTRIES || r.a != r.b;
        broken += r.broken != 0;
        still_owned += r.lock.owner != HS_BIAS_OFF;
    }
    CHECK_EQ(lost, 0);
    CHECK_EQ(broken, 0);
    CHECK_EQ(still_owned, 0); /* the other thread's entries took it away every time */
}

static void test_fork_child_takes_a_lock_owned_by_a_thread_gone(void)
{
    check_context("the fork child takes a lock owned by a thread that is not in it");
    hs_biased_lock theirs = HS_BIASED_LOCK_INIT;
    struct owner_probe o = {&theirs, false};
    on_thread(claim, &o);
    pid_t pid = fork();
    if (pid == 0) {
        bool owner = hs_biased_take(&theirs);
        bool ok = !owner && theirs.owner == HS_BIAS_OFF && theirs.lock.locked;
        hs_biased_unlock(&theirs, owner);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_disabled_locks_are_never_claimed(void)
{
    check_context("with biasing off, the first taker sets the lock to an ordinary spinlock");
    hs_biased_disable();
    CHECK(!hs_biased_enabled());
    hs_biased_lock l = HS_BIASED_LOCK_INIT;
    CHECK(!hs_biased_take(&l));
    hs_biased_unlock(&l, false);
    CHECK_EQ(l.owner, HS_BIAS_OFF);
    CHECK(!hs_biased_enter_owner(&l));
    CHECK(hs_biased_trylock_off(&l));
    hs_spin_unlock(&l.lock);
}

int main(void)
{
    if (!hs_biased_enabled()) {
        /* membarrier refused (a seccomp filter, an old kernel): the locks stay ordinary. */
        fprintf(stderr, "membarrier's private expedited command is not available\n");
        test_disabled_locks_are_never_claimed();
        return check_report();
    }
    test_claim_then_owner_entry();
    test_another_thread_takes_it_away();
    test_hold_suspends_and_gives_back();
    run_races("mutual exclusion with membarrier's fence", 200);
    test_fork_child_takes_a_lock_owned_by_a_thread_gone();
    hs_biased_fence_fallback();
    run_races("mutual exclusion with the page-protection fence", 100);
    test_disabled_locks_are_never_claimed();
    return check_report();
}
