/* test_pointer_table_regions.c: unit tests of malloc debug's live-allocation table
 * (src/malloc_debug/pointer_table.c) with the real backtrace table.
 *
 * Checked against a plain model: entries of every kind (small and large sizes, with and
 * without a backtrace, pointers in shared 64 MiB regions, and above 2^47 where no add may
 * succeed) added, found and removed in a random order; the sizes and backtraces come back as
 * stored; and blocks added
 * by one thread are found and removed by another while threads add and remove their own.
 */
#define _GNU_SOURCE
#include "check.h"
#include "debug_state.h"
#include "pointer_table.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define N 6000

struct model {
    uintptr_t ptr;
    size_t size;
    struct hs_md_bt *bt;
    bool live;
};

static struct model g_model[N];

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static struct hs_md_bt *g_bts[3];

/* Entry i of the model: pointers in a few 64 MiB regions (so shards share, and probe runs
 * mix encodings), some above 2^48; one in four has a backtrace, one in eight a large size. */
static void make_entry(size_t i, uint64_t r)
{
    static const uintptr_t bases[] = {0x555555554000, 0x7f0000000000, 0x7f0004000000,
                                      (uintptr_t)1 << 52};
    uintptr_t base = bases[r % 4 == 3 && (r >> 8) % 8 != 0 ? 0 : r % 4];
    g_model[i].ptr = base + i * 48 + 16 * ((r >> 20) % 2);
    g_model[i].ptr &= ~(uintptr_t)15;
    g_model[i].size = (r >> 32) % 8 == 0 ? 32768 + (r >> 40) % 100000 : (r >> 40) % 32768;
    g_model[i].bt = (r >> 36) % 4 == 0 ? g_bts[(r >> 44) % 3] : NULL;
}

static void check_entry(size_t i)
{
    struct hs_md_ptr_info info = {.size = 999, .bt = (struct hs_md_bt *)1};
    bool found = hs_md_ptr_find((void *)g_model[i].ptr, &info);
    CHECK(found == g_model[i].live);
    if (found && g_model[i].live) {
        CHECK_EQ(info.size, g_model[i].size);
        CHECK(info.bt == g_model[i].bt);
    }
}

static void collect(uintptr_t p, const struct hs_md_ptr_info *info, void *arg)
{
    (void)info;
    (void)p;
    (*(size_t *)arg)++;
}

static void test_against_model(void)
{
    check_context("pointer table against a model");
    uintptr_t frames[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    for (int k = 0; k < 3; k++)
        g_bts[k] = hs_md_bt_acquire(frames[k], 2);
    uint64_t rng = 7;
    for (size_t i = 0; i < N; i++)
        make_entry(i, next_random(&rng));
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        size_t i = next_random(&rng) % N;
        if (g_model[i].live) {
            struct hs_md_ptr_info out = {.size = 0};
            bool removed = hs_md_ptr_remove((void *)g_model[i].ptr, &out);
            CHECK(removed);
            if (removed) {
                CHECK_EQ(out.size, g_model[i].size);
                CHECK(out.bt == g_model[i].bt);
                hs_md_bt_release(out.bt);
            }
            g_model[i].live = false;
            live--;
        } else {
            struct hs_md_ptr_info in = {.size = g_model[i].size, .bt = g_model[i].bt};
            hs_md_bt_ref(in.bt);
            /* Above the 47-bit user space (no block of glibc's is there) the add fails. */
            bool user_space = g_model[i].ptr >> 47 == 0;
            CHECK(hs_md_ptr_add((void *)g_model[i].ptr, &in) == user_space);
            if (!user_space) {
                hs_md_bt_release(in.bt);
                continue;
            }
            g_model[i].live = true;
            live++;
        }
        if (step % 1000 == 0)
            for (size_t j = 0; j < N; j++)
                check_entry(j);
    }
    for (size_t j = 0; j < N; j++)
        check_entry(j);
    CHECK_EQ(hs_md_ptr_count(), live);
    size_t seen = 0;
    hs_md_ptr_lock_all();
    hs_md_ptr_foreach_locked(collect, &seen);
    hs_md_ptr_unlock_all();
    CHECK_EQ(seen, live);
    /* Removing what is not there fails and changes nothing. */
    struct hs_md_ptr_info out;
    CHECK(!hs_md_ptr_remove((void *)(g_model[0].ptr + 8), &out));
    CHECK_EQ(hs_md_ptr_count(), live);
    for (size_t j = 0; j < N; j++) {
        if (g_model[j].live) {
            CHECK(hs_md_ptr_remove((void *)g_model[j].ptr, &out));
            hs_md_bt_release(out.bt);
            g_model[j].live = false;
        }
    }
    CHECK_EQ(hs_md_ptr_count(), 0);
    for (int k = 0; k < 3; k++)
        hs_md_bt_release(g_bts[k]);
    CHECK_EQ(hs_md_bt_count(), 0);
}

/* ---- cross-thread: one thread adds, another removes ---- */

#define PER_THREAD 20000

struct worker {
    uintptr_t base;
    int failures;
};

static void *own_blocks(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < 20; round++) {
        for (uintptr_t i = 0; i < PER_THREAD; i++) {
            struct hs_md_ptr_info in = {.size = i % 40000};
            if (!hs_md_ptr_add((void *)(w->base + i * 32), &in))
                w->failures++;
        }
        for (uintptr_t i = 0; i < PER_THREAD; i++) {
            struct hs_md_ptr_info out;
            if (!hs_md_ptr_remove((void *)(w->base + i * 32), &out) || out.size != i % 40000)
                w->failures++;
        }
    }
    return NULL;
}

static void *remove_others(void *arg)
{
    struct worker *w = arg;
    for (uintptr_t i = 0; i < PER_THREAD; i++) {
        struct hs_md_ptr_info out;
        if (!hs_md_ptr_remove((void *)(w->base + i * 32), &out) || out.size != i)
            w->failures++;
    }
    return NULL;
}

static void test_cross_thread(void)
{
    check_context("blocks added by one thread, removed by another");
    /* The main thread adds blocks in one region; another thread removes them while two
     * more add and remove blocks of their own regions. */
    struct worker mine = {0x7f1000000000, 0};
    for (uintptr_t i = 0; i < PER_THREAD; i++) {
        struct hs_md_ptr_info in = {.size = i};
        CHECK(hs_md_ptr_add((void *)(mine.base + i * 32), &in));
    }
    struct worker a = {0x7f2000000000, 0}, b = {0x7f2004000000, 0};
    pthread_t ta, tb, tr;
    pthread_create(&ta, NULL, own_blocks, &a);
    pthread_create(&tb, NULL, own_blocks, &b);
    pthread_create(&tr, NULL, remove_others, &mine);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tr, NULL);
    CHECK_EQ(a.failures, 0);
    CHECK_EQ(b.failures, 0);
    CHECK_EQ(mine.failures, 0);
    CHECK_EQ(hs_md_ptr_count(), 0);
}

int main(void)
{
    hs_md.mode = HS_MD_DEBUG;
    hs_md.guarded = true; /* records of made-up pointers in shim_stubs.c's store */
    test_against_model();
    test_cross_thread();
    return check_report();
}
