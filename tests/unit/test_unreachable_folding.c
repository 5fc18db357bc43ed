/* test_unreachable_folding.c: leak folding (src/memunreachable/leak_folding.c) with every
 * expected result of the reference, the step budget of the totals, and leak grouping
 * (leak_grouping.c): merging by backtrace, sorting by total size, the limit, contents.
 */
#define _GNU_SOURCE
#include "check.h"
#include "heap_walker.h"
#include "leak_folding.h"
#include "leak_grouping.h"
#include "test_unreachable_fake_heap.h"

#include <time.h>

#define W 8 /* bytes per word */

static struct hs_arena g_arena;
static struct hs_mu_heap_walker g_w;
static struct hs_mu_folding g_fold;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Marks from the given root values (none: everything leaks) and folds. */
static void run(const uintptr_t *roots, size_t nroots)
{
    hs_mu_heap_walker_init(&g_w, &g_arena);
    CHECK_EQ(hs_mu_heap_walker_collect(&g_w, &g_fake_heap), 0);
    CHECK_EQ(hs_mu_heap_walker_finish(&g_w), 0);
    for (size_t i = 0; i < nroots; i++)
        hs_mu_heap_walker_add_root_value(&g_w, roots[i]);
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    hs_mu_heap_walker_mark(&g_w);
    CHECK_EQ(hs_mu_leak_folding_run(&g_w, &g_arena, &g_fold), 0);
    hs_mu_fault_guard_remove();
}

static void done(void)
{
    hs_mu_leak_folding_free(&g_fold, &g_arena);
    hs_mu_heap_walker_destroy(&g_w);
}

static uintptr_t leak_begin(size_t i)
{
    return g_w.allocs[g_fold.leaks[i].alloc].begin;
}

/* Checks that leak i is block p referencing count blocks of bytes bytes. */
static void expect_leak(size_t i, const void *p, size_t count, size_t bytes, int line)
{
    if (!check_at(i < g_fold.num_leaks, __FILE__, line, "leak index in range"))
        return;
    check_eq_at(leak_begin(i), (uintptr_t)p, __FILE__, line, "leak begin", "block");
    check_eq_at(g_fold.leaks[i].referenced_count, count, __FILE__, line, "referenced_count",
                "count");
    check_eq_at(g_fold.leaks[i].referenced_size, bytes, __FILE__, line, "referenced_size", "bytes");
}
#define EXPECT_LEAK(i, p, count, bytes) expect_leak(i, p, count, bytes, __LINE__)

static void test_reference_results(void)
{
    check_context("A->B: 1 leak referencing 1");
    fake_reset();
    uintptr_t *a = fake_block(W), *b = fake_block(W), *c, *d;
    a[0] = (uintptr_t)b;
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaked, 2);
    CHECK_EQ(g_fold.leaked_bytes, 2 * W);
    CHECK_EQ(g_fold.num_leaks, 1);
    EXPECT_LEAK(0, a, 1, W);
    done();

    check_context("A->B<->C: 1 leak referencing 2");
    fake_reset();
    a = fake_block(W), b = fake_block(W), c = fake_block(W);
    a[0] = (uintptr_t)b;
    b[0] = (uintptr_t)c;
    c[0] = (uintptr_t)b;
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, 1);
    EXPECT_LEAK(0, a, 2, 2 * W);
    done();

    check_context("A<->B->C: 2 leaks each referencing 2");
    fake_reset();
    a = fake_block(W), b = fake_block(2 * W), c = fake_block(W);
    a[0] = (uintptr_t)b + 12; /* interior */
    b[0] = (uintptr_t)a;
    b[1] = (uintptr_t)c;
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, 2);
    EXPECT_LEAK(0, a, 2, 3 * W);
    EXPECT_LEAK(1, b, 2, 2 * W);
    done();

    check_context("diamond: 1 leak referencing 3");
    fake_reset();
    a = fake_block(2 * W), b = fake_block(W), c = fake_block(W), d = fake_block(W);
    a[0] = (uintptr_t)b;
    a[1] = (uintptr_t)c;
    b[0] = (uintptr_t)d;
    c[0] = (uintptr_t)d + 7; /* interior: last byte */
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, 1);
    EXPECT_LEAK(0, a, 3, 3 * W);
    done();

    enum { CYCLE = 1000 };
    static uintptr_t *blocks[CYCLE];
    check_context("1000-block cycle: 1000 leaks each referencing 999");
    fake_reset();
    for (size_t i = 0; i < CYCLE; i++)
        blocks[i] = fake_block(W);
    for (size_t i = 0; i < CYCLE; i++)
        blocks[i][0] = (uintptr_t)blocks[(i + 1) % CYCLE];
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, CYCLE);
    CHECK_EQ(g_fold.num_components, 1);
    size_t ok = 0;
    for (size_t i = 0; i < g_fold.num_leaks; i++)
        ok += leak_begin(i) == (uintptr_t)blocks[i] && g_fold.leaks[i].referenced_count == 999 &&
              g_fold.leaks[i].referenced_size == 999 * W;
    CHECK_EQ(ok, CYCLE);
    done();

    check_context("entry block into a 1000-block cycle: 1 leak referencing 1000");
    fake_reset();
    uintptr_t *entry = fake_block(W);
    for (size_t i = 0; i < CYCLE; i++)
        blocks[i] = fake_block(W);
    for (size_t i = 0; i < CYCLE; i++)
        blocks[i][0] = (uintptr_t)blocks[(i + 1) % CYCLE];
    entry[0] = (uintptr_t)blocks[CYCLE - 1];
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, 1);
    EXPECT_LEAK(0, entry, CYCLE, CYCLE * W);
    done();
}

static void test_edges(void)
{
    check_context("self reference, one past the end, reachable targets");
    fake_reset();
    uintptr_t *a = fake_block(2 * W), *b = fake_block(W), *c = fake_block(W), *r = fake_block(W);
    uintptr_t *e = fake_block(W);
    a[0] = (uintptr_t)a;     /* self: no edge */
    a[1] = (uintptr_t)b + W; /* one past the end of b: no edge */
    c[0] = (uintptr_t)r;     /* c -> r, but r is reachable */
    r[0] = (uintptr_t)e + 3; /* r -> e: e reachable */
    uintptr_t root = (uintptr_t)r;
    run(&root, 1);
    CHECK_EQ(g_fold.num_leaked, 3);
    CHECK_EQ(g_fold.leaked_bytes, 4 * W);
    CHECK_EQ(g_fold.num_leaks, 3);
    EXPECT_LEAK(0, a, 0, 0);
    EXPECT_LEAK(1, b, 0, 0);
    EXPECT_LEAK(2, c, 0, 0);
    CHECK_EQ(g_fold.num_edges, 0);
    done();

    check_context("nothing leaked");
    fake_reset();
    a = fake_block(W);
    root = (uintptr_t)a;
    run(&root, 1);
    CHECK_EQ(g_fold.num_leaked, 0);
    CHECK_EQ(g_fold.num_leaks, 0);
    done();

    check_context("two roots sharing a subtree, and a component reached from two roots");
    fake_reset();
    uintptr_t *r1 = fake_block(W), *r2 = fake_block(2 * W), *s = fake_block(W);
    uintptr_t *t = fake_block(3 * W), *u = fake_block(W);
    r1[0] = (uintptr_t)s;
    r2[0] = (uintptr_t)s;
    r2[1] = (uintptr_t)u;
    s[0] = (uintptr_t)t;
    t[0] = (uintptr_t)s; /* s <-> t */
    run(NULL, 0);
    CHECK_EQ(g_fold.num_leaks, 2);
    EXPECT_LEAK(0, r1, 2, 4 * W);
    EXPECT_LEAK(1, r2, 3, 5 * W);
    done();
}

static void test_big_graphs(void)
{
    enum { BIG = 100000 };
    check_context("100000-block chain");
    fake_reset();
    uintptr_t *prev = NULL, *first = NULL;
    for (size_t i = 0; i < BIG; i++) {
        uintptr_t *blk = fake_block(4 * W);
        if (prev)
            prev[2] = (uintptr_t)blk + 5;
        else
            first = blk;
        prev = blk;
    }
    double t0 = now_s();
    run(NULL, 0);
    double t1 = now_s();
    CHECK_EQ(g_fold.num_leaks, 1);
    EXPECT_LEAK(0, first, BIG - 1, (size_t)(BIG - 1) * 4 * W);
    printf("fold 100000-block chain: %.1f ms (mark + fold)\n", (t1 - t0) * 1e3);
    done();

    check_context("100000-block cycle");
    fake_reset();
    static uintptr_t *blocks[BIG];
    for (size_t i = 0; i < BIG; i++)
        blocks[i] = fake_block(2 * W);
    for (size_t i = 0; i < BIG; i++) {
        blocks[i][0] = (uintptr_t)blocks[(i + 1) % BIG];
        blocks[i][1] = (uintptr_t)blocks[(i + 7) % BIG]; /* extra edges inside the cycle */
    }
    t0 = now_s();
    run(NULL, 0);
    t1 = now_s();
    CHECK_EQ(g_fold.num_leaks, BIG);
    size_t ok = 0;
    for (size_t i = 0; i < g_fold.num_leaks; i++)
        ok += g_fold.leaks[i].referenced_count == BIG - 1;
    CHECK_EQ(ok, BIG);
    printf("fold 100000-block cycle: %.1f ms (mark + fold)\n", (t1 - t0) * 1e3);
    done();

    check_context("100000 independent leaks of 1000 bytes");
    fake_reset();
    for (size_t i = 0; i < BIG; i++) {
        uint8_t *blk = fake_block(1000);
        memset(blk, 0x5a, 1000);
    }
    t0 = now_s();
    run(NULL, 0);
    t1 = now_s();
    CHECK_EQ(g_fold.num_leaks, BIG);
    printf("fold 100000 leaks of 1000 bytes: %.1f ms (mark + fold)\n", (t1 - t0) * 1e3);
    done();
}

static void test_budget(void)
{
    check_context("many roots sharing one chain: over the budget, upper bounds (exact here)");
    fake_reset();
    enum { ROOTS = 10000, CHAIN = 20000 };
    uintptr_t *prev = NULL, *head = NULL;
    for (size_t i = 0; i < CHAIN; i++) {
        uintptr_t *blk = fake_block(W);
        if (prev)
            prev[0] = (uintptr_t)blk;
        else
            head = blk;
        prev = blk;
    }
    for (size_t i = 0; i < ROOTS; i++)
        ((uintptr_t *)fake_block(W))[0] = (uintptr_t)head;
    double t0 = now_s();
    run(NULL, 0);
    double t1 = now_s();
    CHECK_EQ(g_fold.num_leaks, ROOTS);
    CHECK(g_fold.num_approximate > 0 && g_fold.num_approximate < ROOTS);
    size_t ok = 0;
    for (size_t i = 0; i < g_fold.num_leaks; i++)
        ok += g_fold.leaks[i].referenced_count == CHAIN &&
              g_fold.leaks[i].referenced_size == CHAIN * W;
    CHECK_EQ(ok, ROOTS);
    printf("fold 10000 roots over one 20000-block chain: %.1f ms (mark + fold), %zu "
           "approximate\n",
           (t1 - t0) * 1e3, g_fold.num_approximate);
    done();

    check_context("upper bounds count shared parts once per path");
    fake_reset();
    uintptr_t *r = fake_block(2 * W), *a = fake_block(W), *b = fake_block(W);
    uintptr_t *c = fake_block(W), *d = fake_block(W), *s2 = fake_block(W), *e = fake_block(W);
    r[0] = (uintptr_t)a;
    r[1] = (uintptr_t)b;
    a[0] = (uintptr_t)c;
    b[0] = (uintptr_t)c;
    c[0] = (uintptr_t)d;
    s2[0] = (uintptr_t)e;
    hs_mu_heap_walker_init(&g_w, &g_arena);
    hs_mu_heap_walker_collect(&g_w, &g_fake_heap);
    hs_mu_heap_walker_finish(&g_w);
    hs_mu_fault_guard_install();
    hs_mu_heap_walker_mark(&g_w);
    CHECK_EQ(hs_mu_leak_folding_run_budget(&g_w, &g_arena, &g_fold, 0), 0);
    hs_mu_fault_guard_remove();
    CHECK_EQ(g_fold.num_leaks, 2);
    CHECK_EQ(g_fold.num_approximate, 2);
    EXPECT_LEAK(0, r, 6, 6 * W); /* a, b, c twice, d twice (exact: 4) */
    EXPECT_LEAK(1, s2, 1, W);
    done();
}

/* ---- Grouping ------------------------------------------------------------------------ */

static struct hs_mu_grouping g_group;

static void group(size_t limit, bool with_backtraces)
{
    run(NULL, 0);
    struct hs_mu_heap_source heap = g_fake_heap;
    if (!with_backtraces)
        heap.backtrace = NULL;
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    CHECK_EQ(hs_mu_leak_grouping_run(&g_w, &g_fold, &heap, limit, &g_arena, &g_group), 0);
    hs_mu_fault_guard_remove();
}

static void group_done(void)
{
    hs_mu_leak_grouping_free(&g_group, &g_arena);
    done();
}

static void test_grouping(void)
{
    check_context("merging by backtrace, sorting, limit, contents");
    fake_reset();
    static const uintptr_t bt1[] = {0x1000, 0x2000, 0x3000};
    static const uintptr_t bt1_short[] = {0x1000, 0x2000};
    static const uintptr_t bt9[] = {0x9000};
    uint8_t *x = fake_block(16), *y = fake_block(32), *z = fake_block(48);
    uint8_t *n1 = fake_block(200), *n2 = fake_block(8), *n3 = fake_block(8);
    uintptr_t *p = fake_block(64), *q = fake_block(40);
    uintptr_t *w1 = fake_block(8), *v = fake_block(8), *u1 = fake_block(8), *t = fake_block(16);
    fake_set_backtrace(x, 3, bt1);
    fake_set_backtrace(y, 3, bt1);
    fake_set_backtrace(z, 3, bt1);
    fake_set_backtrace(p, 2, bt1_short); /* a prefix of bt1: different */
    fake_set_backtrace(w1, 1, bt9);
    fake_set_backtrace(u1, 1, bt9);
    p[3] = (uintptr_t)q;
    w1[0] = (uintptr_t)v;
    u1[0] = (uintptr_t)t;
    memcpy(x, "leak x 0123456789", 16);
    for (size_t i = 0; i < 200; i++)
        n1[i] = (uint8_t)i;
    memcpy(n2, "n2n2n2n2", 8);
    memcpy(n3, "n3n3n3n3", 8);
    (void)n2;
    (void)n3;

    group(100, true);
    /* Folded leaks: x y z n1 n2 n3 p w1 u1 (q, v, t referenced). Groups: x(+y+z), n1, n2, n3,
     * p, w1(+u1). */
    CHECK_EQ(g_fold.num_leaked, 12);
    CHECK_EQ(g_fold.num_leaks, 9);
    CHECK_EQ(g_group.num_groups, 6);
    CHECK_EQ(g_group.num_leaks, 6);
    const struct UnreachableLeak *L = g_group.leaks;
    if (g_group.num_leaks == 6) {
        /* Totals: n1 200, p 64+40 = 104, x 16+32+48 = 96, w1 8+8+8+16 = 40, n2 8, n3 8. */
        CHECK_EQ(L[0].begin, (uintptr_t)n1);
        CHECK_EQ(L[0].total_size, 200);
        CHECK_EQ(L[0].num_backtrace_frames, 0);
        CHECK_EQ(L[0].contents_length, 32);
        CHECK_EQ(L[0].contents[31], 31);
        CHECK_EQ(L[1].begin, (uintptr_t)p);
        CHECK_EQ(L[1].referenced_count, 1);
        CHECK_EQ(L[1].referenced_size, 40);
        CHECK_EQ(L[1].total_size, 104);
        CHECK_EQ(L[1].num_backtrace_frames, 2);
        CHECK_EQ(L[1].contents[24 + 0], ((uint8_t *)&p[3])[0]);
        CHECK_EQ(L[2].begin, (uintptr_t)x);
        CHECK_EQ(L[2].size, 16);
        CHECK_EQ(L[2].similar_count, 2);
        CHECK_EQ(L[2].similar_size, 80);
        CHECK_EQ(L[2].similar_referenced_count, 0);
        CHECK_EQ(L[2].total_size, 96);
        CHECK_EQ(L[2].num_backtrace_frames, 3);
        CHECK_EQ(L[2].backtrace_frames[2], 0x3000);
        CHECK_EQ(L[2].contents_length, 16);
        CHECK(memcmp(L[2].contents, "leak x 012345678", 16) == 0);
        CHECK_EQ(L[3].begin, (uintptr_t)w1);
        CHECK_EQ(L[3].referenced_count, 1);
        CHECK_EQ(L[3].referenced_size, 8);
        CHECK_EQ(L[3].similar_count, 1);
        CHECK_EQ(L[3].similar_size, 8);
        CHECK_EQ(L[3].similar_referenced_count, 1);
        CHECK_EQ(L[3].similar_referenced_size, 16);
        CHECK_EQ(L[3].total_size, 40);
        /* Equal totals: lower address first; no backtrace: never merged. */
        CHECK_EQ(L[4].begin, (uintptr_t)n2);
        CHECK_EQ(L[5].begin, (uintptr_t)n3);
        CHECK_EQ(L[4].similar_count + L[5].similar_count, 0);
        CHECK(memcmp(L[4].contents, "n2n2n2n2", 8) == 0);
        CHECK_EQ(L[4].contents_length, 8);
    }
    group_done();

    check_context("limit");
    group(2, true);
    CHECK_EQ(g_group.num_groups, 6);
    CHECK_EQ(g_group.num_leaks, 2);
    if (g_group.num_leaks == 2) {
        CHECK_EQ(g_group.leaks[0].begin, (uintptr_t)n1);
        CHECK_EQ(g_group.leaks[1].begin, (uintptr_t)p);
    }
    group_done();
    group(0, true);
    CHECK_EQ(g_group.num_leaks, 0);
    CHECK(g_group.leaks == NULL);
    group_done();

    check_context("no backtrace source: nothing merges");
    group(100, false);
    CHECK_EQ(g_group.num_groups, 9);
    group_done();
    (void)t;
    (void)v;
    (void)q;
}

static void test_many_similar(void)
{
    check_context("1024 leaks with one backtrace, limit 100");
    fake_reset();
    static const uintptr_t bt[] = {0x4242};
    for (size_t i = 0; i < 1024; i++)
        fake_set_backtrace(fake_block(24), 1, bt);
    for (size_t i = 0; i < 1024; i++)
        fake_block(24 + i % 3 * 8); /* no backtrace */
    group(100, true);
    CHECK_EQ(g_fold.num_leaked, 2048);
    CHECK_EQ(g_group.num_groups, 1025);
    CHECK_EQ(g_group.num_leaks, 100);
    CHECK_EQ(g_group.leaks[0].similar_count, 1023);
    CHECK_EQ(g_group.leaks[0].total_size, 1024 * 24);
    bool sorted = true;
    for (size_t i = 1; i < g_group.num_leaks; i++)
        sorted &= g_group.leaks[i - 1].total_size >= g_group.leaks[i].total_size;
    CHECK(sorted);
    group_done();
}

int main(void)
{
    test_reference_results();
    test_edges();
    test_big_graphs();
    test_budget();
    test_grouping();
    test_many_similar();
    return check_report();
}
