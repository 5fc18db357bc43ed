/* unreachable_walk_bench.c: how long the sweeper takes on big heaps (not a test).
 *
 * For 10^4, 10^5 and 10^6 blocks of 1000 bytes (glibc malloc, so the layout is a real heap's),
 * held by a root array (an mmap'd mapping described by a synthetic maps text), each block filled
 * with non-pointer words and one pointer to another block (the root array in random order),
 * it times the sweeper's phases on
 * the live process (no fork): listing the allocations (a fake malloc_iterate over a shuffled
 * table, like the debug table's hash order), indexing (sort + region table), roots, marking,
 * folding, grouping; then the whole hs_mu_sweep into a pipe. A second run leaks every tenth
 * block (10% of the heap unreachable). Usage: unreachable_walk_bench [max blocks].
 */
#define _GNU_SOURCE
#include "capture.h"
#include "heap_walker.h"
#include "leak_folding.h"
#include "leak_grouping.h"
#include "result_codec.h"
#include "roots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 1000

static uintptr_t *g_table; /* shuffled block list served by fake_iterate */
static size_t g_n;

static int fake_iterate(uintptr_t base, size_t size,
                        void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    (void)base, (void)size;
    for (size_t i = 0; i < g_n; i++)
        callback(g_table[i], BLOCK, arg);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void run(size_t n, bool leak)
{
    uintptr_t **blocks =
        mmap(NULL, n * sizeof(*blocks), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_table = mmap(NULL, n * sizeof(*g_table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], 0x11, BLOCK); /* 0x1111111111111111: never a heap address */
    }
    for (size_t i = 0; i < n; i++) {
        size_t j = rnd() % n;
        if (leak && j % 10 == 0)
            j++; /* point at kept blocks only, so leaked blocks stay leaked */
        blocks[i][3] = (uintptr_t)blocks[j % n] + 24;
        g_table[i] = (uintptr_t)blocks[i];
    }
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        uintptr_t t = g_table[i];
        g_table[i] = g_table[j];
        g_table[j] = t;
    }
    g_n = n;
    /* The root array lists every block; leaked ones are hidden (~ptr) in it. */
    uintptr_t *roots =
        mmap(NULL, n * sizeof(*roots), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < n; i++)
        roots[i] = leak && i % 10 == 0 ? ~(uintptr_t)blocks[i] : (uintptr_t)blocks[i];
    for (size_t i = n - 1; i > 0; i--) { /* random order: lookups jump around */
        size_t j = rnd() % (i + 1);
        uintptr_t t = roots[i];
        roots[i] = roots[j];
        roots[j] = t;
    }
    char maps[256];
    int len = snprintf(maps, sizeof(maps), "%lx-%lx rw-p 00000000 00:00 0\n", (unsigned long)roots,
                       (unsigned long)((uintptr_t)roots + ((n * sizeof(*roots) + 4095) & ~4095ul)));
    struct hs_mu_capture cap = {.pid = getpid(), .maps_text = maps, .maps_len = (size_t)len};
    struct hs_mu_heap_source heap = {.iterate = fake_iterate};

    struct hs_arena arena = HS_ARENA_INIT;
    struct hs_mu_heap_walker w;
    struct hs_mu_folding fold;
    struct hs_mu_grouping group;
    hs_mu_fault_guard_install();
    double t0 = now();
    hs_mu_heap_walker_init(&w, &arena);
    hs_mu_heap_walker_collect(&w, &heap);
    double t1 = now();
    hs_mu_heap_walker_finish(&w);
    double t2 = now();
    hs_mu_roots_collect(&cap, &w, &arena);
    double t3 = now();
    hs_mu_heap_walker_mark(&w);
    double t4 = now();
    hs_mu_leak_folding_run(&w, &arena, &fold);
    double t5 = now();
    hs_mu_leak_grouping_run(&w, &fold, &heap, 100, &arena, &group);
    double t6 = now();
    hs_mu_fault_guard_remove();
    size_t leaked = fold.num_leaked, big = w.num_big;
    size_t regions = w.num_pages;
    hs_mu_leak_grouping_free(&group, &arena);
    hs_mu_leak_folding_free(&fold, &arena);
    hs_mu_heap_walker_destroy(&w);

    int fds[2];
    if (pipe(fds) != 0)
        abort();
    struct hs_arena arena2 = HS_ARENA_INIT;
    double s0 = now();
    int r = hs_mu_sweep(&cap, &heap, 100, fds[1], &arena2);
    double s1 = now();
    struct UnreachableMemoryInfo info;
    int rr = hs_mu_result_read(fds[0], &info, 1000);
    close(fds[0]);
    close(fds[1]);

    printf("%8zu blocks%s: list %6.1f  index %6.1f  roots %5.1f  mark %6.1f  fold %6.1f  "
           "group %5.1f  = %6.1f ms | hs_mu_sweep %6.1f ms (%s, %zu leaks) | %.2f GB/s marked, "
           "%zu index pages, %zu big\n",
           n, leak ? " (10% leaked)" : "             ", (t1 - t0) * 1e3, (t2 - t1) * 1e3,
           (t3 - t2) * 1e3, (t4 - t3) * 1e3, (t5 - t4) * 1e3, (t6 - t5) * 1e3, (t6 - t0) * 1e3,
           (s1 - s0) * 1e3, r == 0 && rr == 0 ? "ok" : "FAILED", rr == 0 ? info.num_leaks : 0,
           (double)(n - leaked) * BLOCK / (t4 - t3) / 1e9, regions, big);
    if (rr == 0)
        free(info.leaks);
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
    munmap(blocks, n * sizeof(*blocks));
    munmap(g_table, n * sizeof(*g_table));
    munmap(roots, n * sizeof(*roots));
}

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    for (size_t n = 10000; n <= max; n *= 10) {
        run(n, false);
        run(n, true);
    }
    return 0;
}
