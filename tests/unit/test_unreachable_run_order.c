/* test_unreachable_run_order.c: sorting a list made of a few sorted runs in place
 * (src/memunreachable/run_order.c): lists already sorted, runs in reverse order (malloc
 * debug's regions, newest first), a far window in between, random orders of random runs
 * (against hs_sort), and the lists it must leave alone (interleaving runs, too many runs, too
 * much out of order) exactly as they were.
 */
#include "check.h"
#include "run_order.h"
#include "sort.h"

#include <stdlib.h>

static struct hs_arena g_arena;

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

#define WINDOW ((uintptr_t)1 << HS_MU_RUN_WINDOW_SHIFT)
#define MAX_N (1u << 20)

static struct hs_mu_alloc g_list[MAX_N], g_copy[MAX_N], g_orig[MAX_N];

static int by_begin(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = ((const struct hs_mu_alloc *)pa)->begin,
              b = ((const struct hs_mu_alloc *)pb)->begin;
    return a < b ? -1 : a > b;
}

/* Appends `len` ascending blocks of window `win` starting at offset `off` (16 bytes apart at
 * least; end = begin + 16 marks nothing, only pairs travel together). */
static size_t add_run(size_t n, uintptr_t win, uintptr_t off, size_t len)
{
    uintptr_t at = win * WINDOW + off;
    for (size_t i = 0; i < len; i++) {
        g_list[n].begin = at;
        g_list[n].end = at ^ 0x5a5a; /* a value that must travel with its begin */
        n++;
        at += 16 * (1 + rnd() % 8);
    }
    return n;
}

/* Sorts g_list[0, n) with hs_mu_order_runs and checks it against hs_sort of a copy. */
static void check_sorts(size_t n)
{
    memcpy(g_copy, g_list, n * sizeof(*g_list));
    hs_sort(g_copy, n, sizeof(*g_copy), by_begin, NULL);
    CHECK_EQ(hs_mu_order_runs(g_list, n, &g_arena), 1);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += g_list[i].begin != g_copy[i].begin || g_list[i].end != g_copy[i].end;
    CHECK_EQ(differ, 0);
}

/* Checks that hs_mu_order_runs refuses g_list[0, n) and leaves it as it was. */
static void check_refuses(size_t n)
{
    memcpy(g_copy, g_list, n * sizeof(*g_list));
    CHECK_EQ(hs_mu_order_runs(g_list, n, &g_arena), 0);
    CHECK(memcmp(g_list, g_copy, n * sizeof(*g_list)) == 0);
}

static void test_sorted_lists(void)
{
    check_context("a sorted list (one run, or runs across windows in order) stays as it is");
    CHECK_EQ(hs_mu_order_runs(g_list, 0, &g_arena), 1);
    size_t n = add_run(0, 5, 64, 1);
    check_sorts(n);
    n = add_run(0, 5, 64, 1000);
    check_sorts(n);
    n = 0;
    for (uintptr_t w = 100; w < 110; w++)
        n = add_run(n, w, 16 * (rnd() % 1000), 3000);
    check_sorts(n);
}

static void test_malloc_debug_order(void)
{
    check_context("regions newest first on a heap grown upwards, one far mapping in between");
    /* As leaks_bench lists: the brk heap's windows from the highest down, then the big array
     * mmapped early (far above), then the heap's first window. */
    size_t n = 0;
    for (uintptr_t w = 0x1000 + 20; w > 0x1000; w--)
        n = add_run(n, w, 16, 20000);
    n = add_run(n, 0x3f000, 4096, 1);
    n = add_run(n, 0x1000, 16, 20000);
    check_sorts(n);

    check_context("runs in reverse order, each of its own size");
    n = 0;
    for (uintptr_t w = 300; w > 200; w--)
        n = add_run(n, w, 16 * (rnd() % 4096), 1 + rnd() % 3000);
    check_sorts(n);
}

static void test_random_orders(void)
{
    check_context("random orders of random runs, two runs sharing a window");
    size_t refused = 0;
    for (int round = 0; round < 200; round++) {
        size_t k = 2 + rnd() % 40, n = 0;
        uintptr_t wins[64];
        for (size_t i = 0; i < k; i++)
            wins[i] = 1000 + i * 2;
        for (size_t i = k - 1; i > 0; i--) {
            size_t j = rnd() % (i + 1);
            uintptr_t t = wins[i];
            wins[i] = wins[j];
            wins[j] = t;
        }
        for (size_t i = 0; i < k; i++) {
            size_t len = rnd() % 4 == 0 ? 1 : 1 + rnd() % 5000;
            n = add_run(n, wins[i], 16, len);
        }
        /* Two runs of one window, the upper one listed first. */
        n = add_run(n, 999, WINDOW / 2, 100);
        n = add_run(n, 999, 16, 100);
        memcpy(g_orig, g_list, n * sizeof(*g_list));
        memcpy(g_copy, g_list, n * sizeof(*g_list));
        hs_sort(g_copy, n, sizeof(*g_copy), by_begin, NULL);
        int r = hs_mu_order_runs(g_list, n, &g_arena);
        const struct hs_mu_alloc *want = g_copy;
        if (r != 1) {
            /* Too much out of order: refused, and nothing moved. */
            CHECK_EQ(r, 0);
            want = g_orig;
            refused++;
        }
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += g_list[i].begin != want[i].begin || g_list[i].end != want[i].end;
        CHECK_EQ(differ, 0);
    }
    CHECK(refused < 200); /* most are sorted */
}

static void test_refusals(void)
{
    check_context("runs whose begins interleave are left alone");
    size_t n = add_run(0, 7, 16, 100);
    n = add_run(n, 7, 32, 100); /* same window, overlapping span */
    check_refuses(n);

    check_context("a repeated begin is left alone (the walker drops the overlap later)");
    n = add_run(0, 7, 16, 10);
    g_list[n++] = g_list[5];
    n = add_run(n, 8, 16, 10);
    check_refuses(n);

    check_context("more than HS_MU_MAX_RUNS runs are left to the general sort");
    n = 0;
    for (size_t i = 0; i <= HS_MU_MAX_RUNS; i++)
        n = add_run(n, 5000 - i, 16, 3);
    check_refuses(n);
    n = 0;
    for (size_t i = 0; i < HS_MU_MAX_RUNS; i++)
        n = add_run(n, 5000 - i, 16, 3);
    check_sorts(n);

    check_context("more than half out of order (ranks 2 1 0 5 4 3 8 7 6): left alone");
    n = 0;
    static const int ranks[] = {2, 1, 0, 5, 4, 3, 8, 7, 6};
    for (size_t i = 0; i < 9; i++)
        n = add_run(n, 100 + (uintptr_t)ranks[i], 16, 50);
    check_refuses(n);
}

int main(void)
{
    test_sorted_lists();
    test_malloc_debug_order();
    test_random_orders();
    test_refusals();
    return check_report();
}
