/* test_backtrace_cache.c: unit tests of the per-thread reference cache of malloc debug's
 * backtrace table (src/malloc_debug/backtrace_table.c, hs_md_bt_cache_enable).
 *
 * Checked: a repeated acquire returns the same record and counts every reference handed out;
 * references acquired by one thread and released by another are all counted back (the
 * record is freed exactly when the last allocation's reference and every thread's stock are
 * gone: the count never reaches 0 early, which would free a record still in use); a
 * thread's stock goes back when it exits; releasing more than a batch gives the surplus
 * back; many threads acquiring and releasing the same and different stacks end with every
 * record freed; in a forked child the forking thread's cache works and every lock is free;
 * stacks alike in their innermost frames and depth (one key in the cache's hint index) each
 * get their own record, interleaved, and every reference is counted back.
 */
#define _GNU_SOURCE
#include "backtrace_table.h"
#include "check.h"
#include "debug_state.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const uintptr_t k_frames[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};

static size_t refs_of(struct hs_md_bt *bt)
{
    return __atomic_load_n(&bt->refs, __ATOMIC_RELAXED);
}

static void test_same_record_and_flush(void)
{
    check_context("one thread: same record, counted references, flush");
    struct hs_md_bt *held[100];
    for (int i = 0; i < 100; i++)
        held[i] = hs_md_bt_acquire(k_frames[0], 3);
    for (int i = 1; i < 100; i++)
        CHECK(held[i] == held[0]);
    /* 100 handed out, the rest of the stock (and the cache's own reference) on top. */
    CHECK(refs_of(held[0]) > 100);
    CHECK_EQ(hs_md_bt_count(), 1);
    for (int i = 0; i < 99; i++)
        hs_md_bt_release(held[i]);
    /* The surplus went back: the stock holds at most two batches and the cache's own. */
    CHECK(refs_of(held[0]) <= 1 + 2 * 32 + 1);
    hs_md_bt_cache_flush();
    CHECK_EQ(refs_of(held[0]), 1); /* only the last allocation's */
    hs_md_bt_release(held[99]);
    hs_md_bt_cache_flush();
    CHECK_EQ(hs_md_bt_count(), 0);
}

/* ---- acquired by one thread, released by another ---- */

#define CROSS 5000

static struct hs_md_bt *g_cross[CROSS];

static void *acquire_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < CROSS; i++)
        g_cross[i] = hs_md_bt_acquire(k_frames[i % 2], 3);
    return NULL; /* the thread's stock goes back at exit */
}

static void *release_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < CROSS; i++)
        hs_md_bt_release(g_cross[i]);
    return NULL;
}

static void test_cross_thread_release(void)
{
    check_context("acquired by one thread, released by another, both exited");
    pthread_t t;
    pthread_create(&t, NULL, acquire_many, NULL);
    pthread_join(t, NULL);
    /* The acquiring thread exited: its stock was given back, the allocations' remain. */
    CHECK_EQ(refs_of(g_cross[0]), CROSS / 2);
    CHECK_EQ(refs_of(g_cross[1]), CROSS / 2);
    /* The main thread also uses one of these stacks: the releasing thread's counts must
     * still add up with main's stock in the count. */
    struct hs_md_bt *mine = hs_md_bt_acquire(k_frames[0], 3);
    CHECK(mine == g_cross[0]);
    pthread_create(&t, NULL, release_many, NULL);
    pthread_join(t, NULL);
    CHECK_EQ(hs_md_bt_count(), 1); /* k_frames[1]'s record is gone; main's is held */
    hs_md_bt_release(mine);
    hs_md_bt_cache_flush();
    CHECK_EQ(hs_md_bt_count(), 0);
}

/* ---- many threads, same and different stacks ---- */

#define THREADS 6
#define PER 20000

static void *churn(void *arg)
{
    uintptr_t seed = (uintptr_t)arg;
    struct hs_md_bt *held[64] = {0};
    for (int i = 0; i < PER; i++) {
        size_t k = (seed * 7 + (size_t)i * 13) % 64;
        if (held[k]) {
            hs_md_bt_release(held[k]);
            held[k] = NULL;
        } else {
            held[k] = hs_md_bt_acquire(k_frames[(k + seed) % 4], 3);
        }
    }
    /* Hand the half still held to the main thread: released there. */
    struct hs_md_bt **out = malloc(sizeof(held));
    for (int k = 0; k < 64; k++)
        out[k] = held[k];
    return out;
}

static void test_many_threads(void)
{
    check_context("many threads, same and different stacks");
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)i);
    for (int i = 0; i < THREADS; i++) {
        struct hs_md_bt **held;
        pthread_join(t[i], (void **)&held);
        for (int k = 0; k < 64; k++)
            hs_md_bt_release(held[k]);
        free(held);
    }
    hs_md_bt_cache_flush();
    CHECK_EQ(hs_md_bt_count(), 0);
}

/* ---- fork ---- */

static void test_fork(void)
{
    check_context("fork");
    struct hs_md_bt *a = hs_md_bt_acquire(k_frames[2], 3);
    hs_md_bt_lock();
    pid_t pid = fork();
    if (pid == 0) {
        hs_md_bt_unlock();
        struct hs_md_bt *b = hs_md_bt_acquire(k_frames[2], 3);
        struct hs_md_bt *c = hs_md_bt_acquire(k_frames[3], 3); /* a miss: takes a lock */
        int ok = b == a && c && refs_of(a) >= 2;
        hs_md_bt_release(b);
        hs_md_bt_release(c);
        hs_md_bt_release(a);
        hs_md_bt_cache_flush();
        _exit(ok && hs_md_bt_count() == 0 ? 0 : 1);
    }
    hs_md_bt_unlock();
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    hs_md_bt_release(a);
    hs_md_bt_cache_flush();
    CHECK_EQ(hs_md_bt_count(), 0);
}

/* ---- stacks alike in the hint index's key ---- */

/* Same innermost two frames and depth, different deeper frames: the hint index sends them
 * to one slot, and only the comparison of every frame tells them apart. */
#define ALIKE 4
static const uintptr_t k_alike[ALIKE][5] = {
    {0x1000, 0x2000, 0x3000, 0x4000, 0x5000},
    {0x1000, 0x2000, 0x3000, 0x4000, 0x5001},
    {0x1000, 0x2000, 0x9000, 0x4000, 0x5000},
    {0x1000, 0x2000, 0x3000, 0x4008, 0x5000},
};

static void test_alike_stacks(void)
{
    check_context("stacks alike in their innermost frames and depth");
    enum { ROUNDS = 200 };
    static struct hs_md_bt *held[ROUNDS][ALIKE];
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < ALIKE; k++) {
            int s = (k + r) % ALIKE; /* interleaved, in a changing order */
            struct hs_md_bt *bt = hs_md_bt_acquire(k_alike[s], 5);
            CHECK(bt != NULL);
            if (!bt)
                return;
            CHECK_EQ(bt->num_frames, 5);
            CHECK(memcmp(bt->frames, k_alike[s], sizeof(k_alike[s])) == 0);
            held[r][s] = bt;
        }
    }
    for (int s = 0; s < ALIKE; s++) {
        for (int t = s + 1; t < ALIKE; t++)
            CHECK(held[0][s] != held[0][t]);
        for (int r = 1; r < ROUNDS; r++)
            CHECK(held[r][s] == held[0][s]);
    }
    CHECK_EQ(hs_md_bt_count(), ALIKE);
    /* A shorter stack with the same innermost frames is another record again. */
    struct hs_md_bt *shorter = hs_md_bt_acquire(k_alike[0], 4);
    CHECK(shorter != NULL && shorter != held[0][0] && shorter->num_frames == 4);
    hs_md_bt_release(shorter);
    for (int r = 0; r < ROUNDS; r++)
        for (int s = 0; s < ALIKE; s++)
            hs_md_bt_release(held[r][s]);
    hs_md_bt_cache_flush();
    CHECK_EQ(hs_md_bt_count(), 0);
}

int main(void)
{
    hs_md.mode = HS_MD_DEBUG;
    hs_md_bt_cache_enable();
    test_same_record_and_flush();
    test_cross_thread_release();
    test_many_threads();
    test_alike_stacks();
    test_fork();
    return check_report();
}
