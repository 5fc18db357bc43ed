/* test_free_queue_rings.c: unit tests of free_track's per-thread rings (src/malloc_debug/
 * free_queue.c), compiled with the real backtrace table; hs_md_backing_free (guarded.c in
 * the shim) is defined here and records which blocks left the queue, and in what order
 * (it keeps them allocated, so that no two blocks of the test share an address).
 *
 * Checked: one thread keeps exactly the last N blocks, first in, first out; a thread's
 * frees evict only blocks that thread freed, and the budget is shared between the threads
 * that free; a block freed by one thread is found (with its free backtrace) by another;
 * the ring of a thread that exited, with its blocks, goes to the next thread that frees; in
 * a forked child the rings of the parent's other threads are let go the same way and every
 * lock is free.
 */
#define _GNU_SOURCE
#include "check.h"
#include "debug_state.h"
#include "free_queue.h"
#include "guarded.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK 64
#define MAX_RETIRED 4096
#define BUDGET 30

/* The blocks hs_md_backing_free got, in order. */
static pthread_mutex_t g_retired_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_retired[MAX_RETIRED];
static size_t g_num_retired;

void hs_md_backing_free(void *orig, struct hs_md_bt *free_bt)
{
    (void)free_bt;
    pthread_mutex_lock(&g_retired_lock);
    if (g_num_retired < MAX_RETIRED)
        g_retired[g_num_retired++] = orig;
    pthread_mutex_unlock(&g_retired_lock);
    /* Not freed: every block of the test keeps an address of its own. */
}

static bool was_retired(const void *p)
{
    pthread_mutex_lock(&g_retired_lock);
    bool found = false;
    for (size_t i = 0; i < g_num_retired && !found; i++)
        found = g_retired[i] == p;
    pthread_mutex_unlock(&g_retired_lock);
    return found;
}

static size_t retired_count(void)
{
    pthread_mutex_lock(&g_retired_lock);
    size_t n = g_num_retired;
    pthread_mutex_unlock(&g_retired_lock);
    return n;
}

/* Every block made, freed at the end (LeakSanitizer runs this test). */
static void *g_made[MAX_RETIRED];
static size_t g_num_made;

/* A block as free_track leaves it: filled with the free value (0xef). */
static void *freed_block(void)
{
    void *p = malloc(BLOCK);
    CHECK(p != NULL);
    memset(p, 0xef, BLOCK);
    pthread_mutex_lock(&g_retired_lock);
    CHECK(g_num_made < MAX_RETIRED);
    g_made[g_num_made++] = p;
    pthread_mutex_unlock(&g_retired_lock);
    return p;
}

static void push(void *p, struct hs_md_bt *bt)
{
    /* The frames of bt: the ring keeps a copy, a lookup makes them a record again (the
     * same one, the table being shared). */
    hs_md_free_queue_push(p, p, BLOCK, bt ? bt->frames : NULL, bt ? bt->num_frames : 0, NULL);
}

/* ---- one thread: exactly the last N, in order ---- */

static void test_one_thread_fifo(void)
{
    check_context("one thread keeps the last N blocks in order");
    void *b[BUDGET + 10];
    for (int i = 0; i < BUDGET + 10; i++) {
        b[i] = freed_block();
        push(b[i], NULL);
    }
    /* The whole budget is main's: BUDGET + 10 pushed, the first 10 retired in order. */
    CHECK_EQ(hs_md_free_queue_count(), BUDGET);
    CHECK_EQ(retired_count(), 10);
    for (int i = 0; i < 10; i++)
        CHECK(g_retired[i] == b[i]);
    struct hs_md_bt *bt = NULL;
    CHECK(!hs_md_free_queue_find(b[9], &bt));
    CHECK(hs_md_free_queue_find(b[10], &bt));
}

/* ---- two threads: each evicts only its own, the budget is shared, lookups cross ---- */

/* Waits at `start`, pushes n blocks, waits at `pushed`, then at `checked` (so that it
 * stays alive, its ring attached, until the main thread has checked). */
struct pusher {
    pthread_barrier_t *start, *pushed, *checked;
    void *blocks[64];
    int n;
    struct hs_md_bt *bt;
};

static void *pusher_main(void *arg)
{
    struct pusher *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < w->n; i++) {
        w->blocks[i] = freed_block();
        push(w->blocks[i], w->bt);
    }
    pthread_barrier_wait(w->pushed);
    pthread_barrier_wait(w->checked);
    return NULL;
}

static void test_threads_evict_their_own(void)
{
    check_context("a thread's frees evict only blocks it freed; lookups cross threads");
    /* a pushes first (so that b's share is known), then b. */
    pthread_barrier_t start_a, start_b, pushed_a, pushed_b, checked;
    pthread_barrier_init(&start_a, NULL, 2);
    pthread_barrier_init(&start_b, NULL, 2);
    pthread_barrier_init(&pushed_a, NULL, 2);
    pthread_barrier_init(&pushed_b, NULL, 2);
    pthread_barrier_init(&checked, NULL, 3);
    uintptr_t frames[2] = {0x1234, 0x5678};
    struct hs_md_bt *bt = hs_md_bt_acquire(frames, 2);
    struct pusher a = {&start_a, &pushed_a, &checked, {0}, 3, NULL};
    struct pusher b = {&start_b, &pushed_b, &checked, {0}, 40, bt};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, pusher_main, &a);
    pthread_create(&tb, NULL, pusher_main, &b);
    size_t before = retired_count();
    pthread_barrier_wait(&start_a);
    pthread_barrier_wait(&pushed_a);
    pthread_barrier_wait(&start_b);
    pthread_barrier_wait(&pushed_b);
    /* Three rings (main, a, b) share the budget: 10 blocks each. a pushed 3, all kept; b
     * pushed 40: what left the queue meanwhile was b's, never a's nor main's. */
    for (int i = 0; i < a.n; i++) {
        CHECK(!was_retired(a.blocks[i]));
        struct hs_md_bt *found = (struct hs_md_bt *)1;
        CHECK(hs_md_free_queue_find(a.blocks[i], &found)); /* from another thread */
        CHECK(found == NULL);
    }
    CHECK(retired_count() > before);
    for (size_t i = before; i < retired_count(); i++) {
        bool bs = false;
        for (int k = 0; k < b.n; k++)
            bs |= g_retired[i] == b.blocks[k];
        CHECK(bs);
    }
    /* b's newest block is queued, with its free backtrace. */
    struct hs_md_bt *found = NULL;
    CHECK(hs_md_free_queue_find(b.blocks[b.n - 1], &found));
    CHECK(found == bt);
    hs_md_bt_release(found);
    /* b kept its share; main, which freed nothing since, still has its BUDGET blocks (a
     * ring over its share shrinks as its own thread frees). */
    CHECK_EQ(hs_md_free_queue_count(), BUDGET + a.n + BUDGET / 3);
    CHECK_EQ(retired_count() - before, b.n - BUDGET / 3);
    pthread_barrier_wait(&checked);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    hs_md_bt_release(bt);
}

/* ---- an exited thread's ring goes to the next thread ---- */

struct single {
    void *blocks[64];
    int n;
};

static void *single_main(void *arg)
{
    struct single *w = arg;
    for (int i = 0; i < w->n; i++) {
        w->blocks[i] = freed_block();
        push(w->blocks[i], NULL);
    }
    return NULL;
}

static void test_exited_thread_ring_is_adopted(void)
{
    check_context("an exited thread's ring, blocks and all, goes to the next thread");
    struct single gone = {{0}, 1};
    pthread_t t;
    pthread_create(&t, NULL, single_main, &gone);
    pthread_join(t, NULL);
    /* Still queued after its thread exited: a double free of it is still recognised. */
    struct hs_md_bt *bt;
    CHECK(hs_md_free_queue_find(gone.blocks[0], &bt));
    CHECK(!was_retired(gone.blocks[0]));
    /* The next thread takes that ring over (the other rings of exited threads as well, one
     * each): its frees push the old block out. Two rings are in use (main's and the new
     * thread's): a share of BUDGET / 2 blocks, which 20 frees overflow. */
    struct single next = {{0}, 20};
    pthread_create(&t, NULL, single_main, &next);
    pthread_join(t, NULL);
    bool any_adopted = was_retired(gone.blocks[0]);
    /* Or the new thread got another exited thread's ring; then gone's ring is left for
     * the next one: run threads until one adopts it (at most the rings that exist). */
    for (int i = 0; i < 4 && !any_adopted; i++) {
        pthread_create(&t, NULL, single_main, &next);
        pthread_join(t, NULL);
        any_adopted = was_retired(gone.blocks[0]);
    }
    CHECK(any_adopted);
}

/* ---- the rings of exited threads are drained by the frees of live threads ---- */

static void test_orphan_rings_drain(void)
{
    check_context("an exited thread's blocks leave the queue as live threads free");
    /* A thread alone beside main frees BUDGET blocks (its share: BUDGET / 2 kept), then
     * exits. main keeps freeing: each of its frees also retires one block of the exited
     * ring, the oldest first, so the queue comes back within the budget without waiting
     * for a new thread to adopt that ring. (Before, the exited ring kept its blocks on top
     * of the budget until a new thread came.) */
    struct single gone = {{0}, BUDGET};
    pthread_t t;
    pthread_create(&t, NULL, single_main, &gone);
    pthread_join(t, NULL);
    size_t kept = 0;
    for (int i = 0; i < gone.n; i++)
        kept += !was_retired(gone.blocks[i]);
    CHECK(kept > 0);
    for (size_t i = 0; i < kept + BUDGET; i++)
        push(freed_block(), NULL);
    for (int i = 0; i < gone.n; i++)
        CHECK(was_retired(gone.blocks[i]));
    CHECK(hs_md_free_queue_count() <= BUDGET);
}

/* ---- fork: the child lets the other threads' rings go and finds every lock free ---- */

static void test_fork_child(void)
{
    check_context("fork: child");
    pthread_barrier_t start, pushed, checked;
    pthread_barrier_init(&start, NULL, 2);
    pthread_barrier_init(&pushed, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    struct pusher a = {&start, &pushed, &checked, {0}, 2, NULL};
    pthread_t ta;
    pthread_create(&ta, NULL, pusher_main, &a);
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&pushed);
    /* a is alive and attached while the process forks. */
    hs_md_free_queue_lock();
    pid_t pid = fork();
    if (pid == 0) {
        hs_md_free_queue_unlock_in_child();
        /* a's ring has no thread here: a new thread of the child adopts it (or another
         * free ring) and its frees retire blocks of the adopted ring. */
        size_t before = retired_count();
        struct single next = {{0}, 20};
        pthread_t t;
        int adopted = 0;
        for (int i = 0; i < 6 && !adopted; i++) {
            pthread_create(&t, NULL, single_main, &next);
            pthread_join(t, NULL);
            adopted = was_retired(a.blocks[0]);
        }
        struct hs_md_bt *bt;
        /* Every ring lock is free (a lookup walks them all) and main's ring still works. */
        hs_md_free_queue_find(a.blocks[1], &bt);
        push(freed_block(), NULL);
        _exit(adopted && retired_count() > before ? 0 : 1);
    }
    hs_md_free_queue_unlock();
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_barrier_wait(&checked);
    pthread_join(ta, NULL);
}

int main(void)
{
    hs_md.mode = HS_MD_DEBUG;
    hs_md.cfg.fill_free_value = 0xef;
    hs_md.cfg.fill_on_free_bytes = SIZE_MAX;
    hs_md_free_queue_init(BUDGET, HS_MD_FREE_QUEUE_INLINE_FRAMES);
    test_one_thread_fifo();
    test_threads_evict_their_own();
    test_exited_thread_ring_is_adopted();
    test_orphan_rings_drain();
#ifndef __SANITIZE_THREAD__ /* TSan cannot start threads in the child of a threaded fork */
    test_fork_child();
#else
    (void)test_fork_child;
#endif
    hs_md_free_queue_verify_all();
    for (size_t i = 0; i < g_num_made; i++) /* the queue is not used again */
        free(g_made[i]);
    return check_report();
}
