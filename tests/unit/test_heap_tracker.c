/* test_heap_tracker.c: unit tests of the profiler daemon's heap tracker
 * (src/profiler/daemon/heap_tracker.c).
 *
 *  - The callstack trie: stacks sharing prefixes or suffixes are distinct callsites and come
 *    back frame for frame; the empty stack; stacks deeper than HS_TRACKER_MAX_FRAMES keep
 *    their innermost frames.
 *  - Totals at weight 1, exactly; the weights of sampled allocations (sampled / size objects,
 *    1 for size 0, sampled <= size and sampled 0).
 *  - Ordering: frees before their mallocs, stale pending frees, address reuse (in order and
 *    reordered), replaced live blocks (older and newer), the pending table's overflow and its
 *    per-address limit, unknown frees, heaps kept apart (one address live in two heaps).
 *  - Dump at max: 100,000 random operations over 3 heaps and 40 stacks, checked at
 *    checkpoints against a brute-force model that copies every callsite's in-use values
 *    whenever the live sampled bytes reach a new peak.
 *  - Memory accounting; allocation failures injected at every allocation of a script (the
 *    test is linked with --wrap=malloc,calloc,realloc): each failing call returns -1 and
 *    leaves the tracker as it was, and the final state equals a tracker that never failed;
 *  - 200,000 random hostile operations (any heap, sequence number, address, size, depth):
 *    no crash, and the live table, the live bytes and the callbacks stay consistent.
 */
#include "check.h"
#include "heap_tracker.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- Allocation failure injection ----------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

/* 0: off; k > 0: the k-th allocation from now fails (then off again). */
static long fail_countdown;
static bool fail_fired;

static bool should_fail(void)
{
    if (fail_countdown > 0 && --fail_countdown == 0) {
        fail_fired = true;
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
    if (should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, n);
}

/* ---- Helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static double rnd_unit(void)
{
    return (double)(rnd() >> 11) / 9007199254740992.0;
}

static bool near(double a, double b)
{
    double d = a > b ? a - b : b - a;
    double m = a < 0 ? -a : a;
    return d <= 1e-6 * (m > 1 ? m : 1);
}

struct site_rec {
    uintptr_t pcs[HS_TRACKER_MAX_FRAMES];
    size_t n;
    struct hs_callsite_values v;
};

struct site_list {
    struct site_rec *v;
    size_t n, cap;
};

static int collect_site(const uintptr_t *pcs, size_t n, const struct hs_callsite_values *v,
                        void *arg)
{
    struct site_list *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        if (!l->v)
            abort();
    }
    struct site_rec *r = &l->v[l->n++];
    r->n = n;
    if (n > HS_TRACKER_MAX_FRAMES)
        abort();
    memcpy(r->pcs, pcs, n * sizeof(*pcs));
    r->v = *v;
    return 0;
}

static struct site_list sites_of(const struct hs_tracker *t, uint32_t heap, bool at_peak)
{
    struct site_list l = {0};
    CHECK_EQ(hs_tracker_foreach(t, heap, at_peak, collect_site, &l), 0);
    return l;
}

static const struct site_rec *find_site(const struct site_list *l, const uintptr_t *pcs, size_t n)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].n == n && memcmp(l->v[i].pcs, pcs, n * sizeof(*pcs)) == 0)
            return &l->v[i];
    return NULL;
}

/* Checks one callsite's four values (within rounding for objects). */
static void check_site_at(const struct site_list *l, const uintptr_t *pcs, size_t n,
                          double alloc_objects, double alloc_bytes, double inuse_objects,
                          double inuse_bytes, int line)
{
    const struct site_rec *r = find_site(l, pcs, n);
    if (!check_at(r != NULL, __FILE__, line, "callsite found"))
        return;
    check_at(near(r->v.alloc_objects, alloc_objects), __FILE__, line, "alloc_objects");
    check_at(r->v.alloc_bytes == alloc_bytes, __FILE__, line, "alloc_bytes");
    check_at(near(r->v.inuse_objects, inuse_objects), __FILE__, line, "inuse_objects");
    check_at(r->v.inuse_bytes == inuse_bytes, __FILE__, line, "inuse_bytes");
    if (!near(r->v.alloc_objects, alloc_objects) || r->v.alloc_bytes != alloc_bytes ||
        !near(r->v.inuse_objects, inuse_objects) || r->v.inuse_bytes != inuse_bytes)
        fprintf(stderr, "    got %g %g %g %g, expected %g %g %g %g\n", r->v.alloc_objects,
                r->v.alloc_bytes, r->v.inuse_objects, r->v.inuse_bytes, alloc_objects, alloc_bytes,
                inuse_objects, inuse_bytes);
}
#define CHECK_SITE(l, pcs, n, ao, ab, io, ib) check_site_at(l, pcs, n, ao, ab, io, ib, __LINE__)

static struct hs_tracker_stats stats(const struct hs_tracker *t)
{
    struct hs_tracker_stats st;
    hs_tracker_get_stats(t, &st);
    return st;
}

/* A malloc with sampled == size (weight 1). */
static int m1(struct hs_tracker *t, uint32_t heap, uint64_t seq, uint64_t addr, uint64_t size,
              const uintptr_t *pcs, size_t n)
{
    return hs_tracker_malloc(t, heap, seq, addr, size, size, pcs, n, seq * 10);
}

static const uintptr_t S_A[] = {0x11, 0x22, 0x33}; /* innermost first; 0x33 is "main" */
static const uintptr_t S_B[] = {0x44, 0x22, 0x33};
static const uintptr_t S_C[] = {0x22, 0x33};
static const uintptr_t S_D[] = {0x33, 0x22, 0x11};

/* ---- Trie ------------------------------------------------------------------------------- */

static void test_trie(void)
{
    check_context("trie");
    struct hs_tracker *t = hs_tracker_new();
    CHECK(t != NULL);
    CHECK_EQ(m1(t, 0, 1, 0x1000, 10, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 2, 0x2000, 20, S_B, 3), 0);
    CHECK_EQ(m1(t, 0, 3, 0x3000, 30, S_C, 2), 0);
    CHECK_EQ(m1(t, 0, 4, 0x4000, 40, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 5, 0x5000, 50, S_D, 3), 0);
    CHECK_EQ(m1(t, 0, 6, 0x6000, 60, NULL, 0), 0);
    CHECK_EQ(m1(t, 0, 7, 0x7000, 70, NULL, 5), 0); /* no pcs: the empty stack */

    /* Nodes: 33, 33>22, 33>22>11, 33>22>44 and 11, 11>22, 11>22>33. */
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.callsites, 7);
    CHECK_EQ(st.mallocs, 7);
    CHECK_EQ(st.live_blocks, 7);
    CHECK_EQ(st.live_sampled_bytes, 280);

    struct site_list l = sites_of(t, 0, false);
    CHECK_EQ(l.n, 5); /* A, B, C, D and the empty stack; interior nodes have no values */
    CHECK_SITE(&l, S_A, 3, 2, 50, 2, 50);
    CHECK_SITE(&l, S_B, 3, 1, 20, 1, 20);
    CHECK_SITE(&l, S_C, 2, 1, 30, 1, 30);
    CHECK_SITE(&l, S_D, 3, 1, 50, 1, 50);
    CHECK_SITE(&l, S_A, 0, 2, 130, 2, 130);
    free(l.v);

    /* Deep stacks keep their innermost frames: two stacks differing only beyond the limit
     * are one callsite. */
    uintptr_t deep[HS_TRACKER_MAX_FRAMES + 44];
    for (size_t i = 0; i < HS_TRACKER_MAX_FRAMES + 44; i++)
        deep[i] = 0x100000 + i * 8;
    CHECK_EQ(m1(t, 0, 8, 0x8000, 5, deep, HS_TRACKER_MAX_FRAMES + 44), 0);
    deep[HS_TRACKER_MAX_FRAMES + 43] = 0xdead;
    CHECK_EQ(m1(t, 0, 9, 0x9000, 5, deep, HS_TRACKER_MAX_FRAMES + 44), 0);
    l = sites_of(t, 0, false);
    CHECK_EQ(l.n, 6);
    CHECK_SITE(&l, deep, HS_TRACKER_MAX_FRAMES, 2, 10, 2, 10);
    free(l.v);
    CHECK_EQ(stats(t).callsites, 7 + HS_TRACKER_MAX_FRAMES);

    hs_tracker_free(t);
    check_context(NULL);
}

/* hs_tracker_new_pcs hands out each node's pc once, in the order the nodes were made, a cap
 * at a time, and only the nodes made since the cursor. */
static void test_new_pcs(void)
{
    check_context("new pcs");
    struct hs_tracker *t = hs_tracker_new();
    CHECK(t != NULL);
    uintptr_t pcs[8];
    size_t cursor = 0;
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 8), 0); /* the root has no pc */
    CHECK_EQ(m1(t, 0, 1, 0x1000, 10, S_A, 3), 0);        /* nodes 33, 22, 11 */
    CHECK_EQ(m1(t, 0, 2, 0x2000, 20, S_B, 3), 0);        /* one new node: 44 */
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 2), 2);
    CHECK_EQ(pcs[0], 0x33);
    CHECK_EQ(pcs[1], 0x22);
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 8), 2);
    CHECK_EQ(pcs[0], 0x11);
    CHECK_EQ(pcs[1], 0x44);
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 8), 0);
    CHECK_EQ(m1(t, 0, 3, 0x3000, 30, S_A, 3), 0); /* no new node */
    CHECK_EQ(m1(t, 0, 4, 0x4000, 40, S_D, 3), 0); /* 11, 11>22, 11>22>33 */
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 8), 3);
    CHECK_EQ(pcs[0], 0x11);
    CHECK_EQ(pcs[1], 0x22);
    CHECK_EQ(pcs[2], 0x33);
    CHECK_EQ(hs_tracker_new_pcs(t, &cursor, pcs, 8), 0);
    CHECK_EQ(cursor, stats(t).callsites + 1);
    hs_tracker_free(t);
    check_context(NULL);
}

static int stop_at_first(const uintptr_t *pcs, size_t n, const struct hs_callsite_values *v,
                         void *arg)
{
    (void)pcs;
    (void)n;
    (void)v;
    (*(int *)arg)++;
    return 7;
}

static int stop_live_at_first(const uintptr_t *pcs, size_t n, uint64_t size, double objects,
                              uint64_t sampled, void *arg)
{
    (void)pcs;
    (void)n;
    (void)size;
    (void)objects;
    (void)sampled;
    (*(int *)arg)++;
    return 9;
}

static void test_early_stop(void)
{
    check_context("early stop");
    struct hs_tracker *t = hs_tracker_new();
    CHECK_EQ(m1(t, 0, 1, 0x1000, 10, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 2, 0x2000, 10, S_B, 3), 0);
    int calls = 0;
    CHECK_EQ(hs_tracker_foreach(t, 0, false, stop_at_first, &calls), 7);
    CHECK_EQ(calls, 1);
    calls = 0;
    CHECK_EQ(hs_tracker_foreach_live(t, 0, stop_live_at_first, &calls), 9);
    CHECK_EQ(calls, 1);
    calls = 0;
    CHECK_EQ(hs_tracker_foreach(t, 1, false, stop_at_first, &calls), 0); /* unused heap */
    CHECK_EQ(hs_tracker_foreach(t, 999, false, stop_at_first, &calls), 0);
    CHECK_EQ(calls, 0);
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Totals and weights ------------------------------------------------------------------ */

static void test_totals_exact(void)
{
    check_context("totals at weight 1");
    struct hs_tracker *t = hs_tracker_new();
    uint64_t seq = 1;
    /* 1000 blocks of 1..1000 bytes on A, every third freed; 500 of 7 bytes on B, all freed. */
    double a_bytes = 0, a_live_bytes = 0, a_live = 0;
    for (uint64_t i = 1; i <= 1000; i++) {
        CHECK_EQ(m1(t, 0, seq++, 0x100000 + i * 0x1000, i, S_A, 3), 0);
        a_bytes += (double)i;
    }
    for (uint64_t i = 1; i <= 1000; i++) {
        if (i % 3 == 0) {
            CHECK_EQ(hs_tracker_record_free(t, 0, seq++, 0x100000 + i * 0x1000), 0);
        } else {
            a_live++;
            a_live_bytes += (double)i;
        }
    }
    for (uint64_t i = 0; i < 500; i++) {
        CHECK_EQ(m1(t, 0, seq++, 0x900000 + i * 16, 7, S_B, 3), 0);
        CHECK_EQ(hs_tracker_record_free(t, 0, seq++, 0x900000 + i * 16), 0);
    }
    struct site_list l = sites_of(t, 0, false);
    CHECK_EQ(l.n, 2);
    CHECK_SITE(&l, S_A, 3, 1000, a_bytes, a_live, a_live_bytes);
    CHECK_SITE(&l, S_B, 3, 500, 3500, 0, 0);
    free(l.v);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.mallocs, 1500);
    CHECK_EQ(st.frees, 333 + 500);
    CHECK_EQ(st.live_blocks, (uint64_t)a_live);
    CHECK_EQ(st.live_sampled_bytes, (uint64_t)a_live_bytes);
    CHECK_EQ(st.peak_sampled_bytes, (uint64_t)a_bytes); /* after the 1000th malloc */
    CHECK_EQ(st.peak_time_ns, 10000);
    CHECK_EQ(st.frees_unknown + st.frees_reordered + st.replaced + st.pending_dropped, 0);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_weights(void)
{
    check_context("weights");
    struct hs_tracker *t = hs_tracker_new();
    const uintptr_t s1[] = {1}, s2[] = {2}, s3[] = {3}, s4[] = {4}, s5[] = {5};
    CHECK_EQ(hs_tracker_malloc(t, 0, 1, 0x10, 100, 4096, s1, 1, 0), 0); /* 40.96 objects */
    CHECK_EQ(hs_tracker_malloc(t, 0, 2, 0x20, 0, 4096, s2, 1, 0), 0);   /* size 0: 1 */
    CHECK_EQ(hs_tracker_malloc(t, 0, 3, 0x30, 5000, 5000, s3, 1, 0), 0);
    CHECK_EQ(hs_tracker_malloc(t, 0, 4, 0x40, 10, 5, s4, 1, 0), 0);  /* sampled < size: 1 */
    CHECK_EQ(hs_tracker_malloc(t, 0, 5, 0x50, 100, 0, s5, 1, 0), 0); /* not sampled: 1, 0 B */
    CHECK_EQ(hs_tracker_malloc(t, 0, 6, 0x60, 3, 8192, s1, 1, 0), 0);
    struct site_list l = sites_of(t, 0, false);
    CHECK_SITE(&l, s1, 1, 40.96 + 8192.0 / 3, 4096 + 8192, 40.96 + 8192.0 / 3, 4096 + 8192);
    CHECK_SITE(&l, s2, 1, 1, 4096, 1, 4096);
    CHECK_SITE(&l, s3, 1, 1, 5000, 1, 5000);
    CHECK_SITE(&l, s4, 1, 1, 5, 1, 5);
    CHECK_SITE(&l, s5, 1, 1, 0, 1, 0);
    free(l.v);
    CHECK_EQ(stats(t).live_sampled_bytes, 4096 + 4096 + 5000 + 5 + 8192);

    /* Freeing the weighted blocks brings their callsites back to exactly 0. */
    CHECK_EQ(hs_tracker_record_free(t, 0, 7, 0x10), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 8, 0x60), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 9, 0x50), 0);
    l = sites_of(t, 0, false);
    const struct site_rec *r = find_site(&l, s1, 1);
    CHECK(r && r->v.inuse_objects == 0 && r->v.inuse_bytes == 0);
    r = find_site(&l, s5, 1);
    CHECK(r && r->v.inuse_objects == 0 && r->v.alloc_objects == 1);
    free(l.v);

    /* A block with sampled 0 does not move the peak. */
    struct hs_tracker_stats before = stats(t);
    CHECK_EQ(hs_tracker_malloc(t, 0, 10, 0x70, 1 << 20, 0, s5, 1, 77), 0);
    CHECK_EQ(stats(t).peak_sampled_bytes, before.peak_sampled_bytes);
    CHECK_EQ(stats(t).peak_time_ns, before.peak_time_ns);
    hs_tracker_free(t);
    check_context(NULL);
}

/* Weights that binary doubles cannot hold exactly, freed in another order than allocated:
 * the in-use numbers still come back to exactly 0. */
static void test_exact_zero(void)
{
    check_context("in use back to exactly 0");
    struct hs_tracker *t = hs_tracker_new();
    const uintptr_t s1[] = {1};
    uint64_t sizes[] = {3, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
    for (uint64_t i = 0; i < 16; i++)
        CHECK_EQ(hs_tracker_malloc(t, 0, i + 1, 0x100 + i * 16, sizes[i], 4096, s1, 1, 0), 0);
    for (uint64_t i = 0; i < 16; i++)
        CHECK_EQ(hs_tracker_record_free(t, 0, 100 + i, 0x100 + ((i * 7) % 16) * 16), 0);
    struct site_list l = sites_of(t, 0, false);
    CHECK_EQ(l.n, 1);
    CHECK(l.n == 1 && l.v[0].v.inuse_objects == 0 && l.v[0].v.inuse_bytes == 0);
    CHECK(l.n == 1 && l.v[0].v.alloc_objects > 16);
    free(l.v);
    hs_tracker_free(t);
    check_context(NULL);
}

/* The peak is the first time the maximum is reached: reaching it again moves nothing. */
static void test_peak_first(void)
{
    check_context("peak first reached");
    struct hs_tracker *t = hs_tracker_new();
    CHECK_EQ(hs_tracker_malloc(t, 0, 1, 0x10, 100, 100, S_A, 3, 111), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 2, 0x10), 0);
    CHECK_EQ(hs_tracker_malloc(t, 1, 3, 0x20, 100, 100, S_B, 3, 333), 0); /* 100 again */
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.peak_sampled_bytes, 100);
    CHECK_EQ(st.peak_time_ns, 111);
    struct site_list l0 = sites_of(t, 0, true), l1 = sites_of(t, 1, true);
    CHECK_SITE(&l0, S_A, 3, 1, 100, 1, 100);
    CHECK_SITE(&l1, S_B, 3, 1, 100, 0, 0);
    free(l0.v);
    free(l1.v);
    /* One byte more is a new peak. */
    CHECK_EQ(hs_tracker_malloc(t, 0, 4, 0x30, 1, 1, S_C, 2, 444), 0);
    st = stats(t);
    CHECK_EQ(st.peak_sampled_bytes, 101);
    CHECK_EQ(st.peak_time_ns, 444);
    l0 = sites_of(t, 0, true);
    l1 = sites_of(t, 1, true);
    CHECK_SITE(&l0, S_A, 3, 1, 100, 0, 0);
    CHECK_SITE(&l0, S_C, 2, 1, 1, 1, 1);
    CHECK_SITE(&l1, S_B, 3, 1, 100, 1, 100);
    free(l0.v);
    free(l1.v);
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Ordering ---------------------------------------------------------------------------- */

static void test_reordered(void)
{
    check_context("free before malloc");
    struct hs_tracker *t = hs_tracker_new();
    /* In order. */
    CHECK_EQ(m1(t, 0, 1, 0xA0, 10, S_A, 3), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 2, 0xA0), 0);
    /* Reordered: the free (seq 4) arrives before its malloc (seq 3). */
    CHECK_EQ(hs_tracker_record_free(t, 0, 4, 0xB0), 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.frees, 1);
    CHECK_EQ(st.frees_reordered, 0); /* pending */
    CHECK_EQ(m1(t, 0, 3, 0xB0, 20, S_B, 3), 0);
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 1);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.live_sampled_bytes, 0);
    CHECK_EQ(st.mallocs, 2);
    struct site_list l = sites_of(t, 0, false);
    CHECK_SITE(&l, S_A, 3, 1, 10, 0, 0);
    CHECK_SITE(&l, S_B, 3, 1, 20, 0, 0);
    free(l.v);
    /* The pending free was used up: a later malloc there is live. */
    CHECK_EQ(m1(t, 0, 5, 0xB0, 30, S_C, 2), 0);
    st = stats(t);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.frees_unknown, 0);
    CHECK_EQ(st.frees_reordered, 1);
    /* A free whose address is live with a larger sequence number does not free it. */
    CHECK_EQ(hs_tracker_record_free(t, 0, 4, 0xB0), 0);
    CHECK_EQ(stats(t).live_blocks, 1);
    CHECK_EQ(hs_tracker_record_free(t, 0, 6, 0xB0), 0);
    CHECK_EQ(stats(t).live_blocks, 0);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_stale(void)
{
    check_context("stale pending free");
    struct hs_tracker *t = hs_tracker_new();
    CHECK_EQ(hs_tracker_record_free(t, 0, 5, 0xC0), 0); /* frees something never seen */
    CHECK_EQ(m1(t, 0, 10, 0xC0, 64, S_A, 3), 0);        /* a later block at that address */
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.frees_unknown, 1);
    CHECK_EQ(st.frees_reordered, 0);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 64);
    CHECK_EQ(hs_tracker_record_free(t, 0, 11, 0xC0), 0);
    st = stats(t);
    CHECK_EQ(st.frees, 1);
    CHECK_EQ(st.live_blocks, 0);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_reuse(void)
{
    check_context("address reuse");
    struct hs_tracker *t = hs_tracker_new();
    /* In order: m1 f2 m3 f4 m5 at one address. */
    CHECK_EQ(m1(t, 0, 1, 0xD0, 8, S_A, 3), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 2, 0xD0), 0);
    CHECK_EQ(m1(t, 0, 3, 0xD0, 16, S_B, 3), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 4, 0xD0), 0);
    CHECK_EQ(m1(t, 0, 5, 0xD0, 32, S_C, 2), 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.frees, 2);
    CHECK_EQ(st.replaced, 0);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 32);

    /* Reordered: both frees arrive first, then the mallocs: each malloc uses up the next
     * free after it. */
    CHECK_EQ(hs_tracker_record_free(t, 0, 12, 0xE0), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 14, 0xE0), 0);
    CHECK_EQ(m1(t, 0, 11, 0xE0, 8, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 13, 0xE0, 16, S_B, 3), 0);
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 2);
    CHECK_EQ(st.frees_unknown, 0);
    CHECK_EQ(st.live_blocks, 1);

    /* The later malloc first (replacing nothing), then the earlier free, then its malloc. */
    CHECK_EQ(m1(t, 0, 23, 0xF0, 100, S_B, 3), 0);
    CHECK_EQ(hs_tracker_record_free(t, 0, 22, 0xF0), 0); /* live seq 23 > 22: pending */
    CHECK_EQ(stats(t).live_blocks, 2);
    CHECK_EQ(m1(t, 0, 21, 0xF0, 50, S_A, 3), 0); /* uses up free 22; block 23 stays */
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 3);
    CHECK_EQ(st.replaced, 0);
    CHECK_EQ(st.live_blocks, 2);
    CHECK_EQ(st.live_sampled_bytes, 32 + 100);
    CHECK_EQ(hs_tracker_record_free(t, 0, 24, 0xF0), 0);
    st = stats(t);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 32);

    struct site_list l = sites_of(t, 0, false);
    CHECK_SITE(&l, S_A, 3, 3, 66, 0, 0);
    CHECK_SITE(&l, S_B, 3, 3, 132, 0, 0);
    CHECK_SITE(&l, S_C, 2, 1, 32, 1, 32);
    free(l.v);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_replaced(void)
{
    check_context("replaced live block");
    struct hs_tracker *t = hs_tracker_new();
    CHECK_EQ(m1(t, 0, 10, 0x500, 10, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 20, 0x500, 20, S_B, 3), 0); /* the free of seq 10 was lost */
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.replaced, 1);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 20);
    /* An older sample arriving over a newer live block: allocated and freed at once. */
    CHECK_EQ(m1(t, 0, 15, 0x500, 40, S_C, 2), 0);
    st = stats(t);
    CHECK_EQ(st.replaced, 2);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 20);
    struct site_list l = sites_of(t, 0, false);
    CHECK_SITE(&l, S_A, 3, 1, 10, 0, 0);
    CHECK_SITE(&l, S_B, 3, 1, 20, 1, 20);
    CHECK_SITE(&l, S_C, 2, 1, 40, 0, 0);
    free(l.v);
    CHECK_EQ(hs_tracker_record_free(t, 0, 21, 0x500), 0);
    CHECK_EQ(stats(t).live_blocks, 0);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_pending_overflow(void)
{
    check_context("pending table overflow");
    struct hs_tracker *t = hs_tracker_new();
    const uint64_t n = HS_TRACKER_MAX_PENDING_FREES + 10;
    for (uint64_t i = 0; i < n; i++)
        CHECK_EQ(hs_tracker_record_free(t, 0, 1000 + i, 0x10000000 + i * 16), 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.pending_dropped, 10);
    CHECK_EQ(st.frees + st.frees_unknown + st.frees_reordered, 0);
    /* The oldest were dropped: a malloc before the first free stays live; the newest is
     * still pending and is used up. */
    CHECK_EQ(m1(t, 0, 1, 0x10000000, 8, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 2, 0x10000000 + (n - 1) * 16, 8, S_A, 3), 0);
    CHECK_EQ(m1(t, 0, 3, 0x10000000 + 10 * 16, 8, S_A, 3), 0); /* the oldest one kept */
    st = stats(t);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.frees_reordered, 2);
    CHECK(hs_tracker_memory(t) >= HS_TRACKER_MAX_PENDING_FREES * 16);
    hs_tracker_free(t);

    /* At most 16 pending frees per address: 20 frees (seq 101..120) keep 105..120. */
    check_context("pending frees per address");
    t = hs_tracker_new();
    for (uint64_t s = 101; s <= 120; s++)
        CHECK_EQ(hs_tracker_record_free(t, 0, s, 0x777), 0);
    CHECK_EQ(stats(t).pending_dropped, 4);
    CHECK_EQ(m1(t, 0, 100, 0x777, 8, S_A, 3), 0); /* uses up 105 */
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 1);
    CHECK_EQ(st.frees_unknown, 0);
    CHECK_EQ(m1(t, 0, 103, 0x777, 8, S_A, 3), 0); /* nothing <= 103 left: uses up 106 */
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 2);
    CHECK_EQ(st.frees_unknown, 0);
    CHECK_EQ(m1(t, 0, 110, 0x777, 8, S_A, 3), 0); /* 107..110 stale, uses up 111 */
    st = stats(t);
    CHECK_EQ(st.frees_reordered, 3);
    CHECK_EQ(st.frees_unknown, 4);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(m1(t, 0, 200, 0x777, 8, S_A, 3), 0); /* 112..120 stale */
    st = stats(t);
    CHECK_EQ(st.frees_unknown, 13);
    CHECK_EQ(st.live_blocks, 1);
    hs_tracker_free(t);
    check_context(NULL);
}

static void test_unknown(void)
{
    check_context("unknown frees");
    struct hs_tracker *t = hs_tracker_new();
    for (uint64_t i = 0; i < 100; i++)
        CHECK_EQ(hs_tracker_record_free(t, 0, i + 1, 0x40000 + i * 32), 0);
    CHECK_EQ(stats(t).frees_unknown, 0); /* still pending */
    for (uint64_t i = 0; i < 100; i++)
        CHECK_EQ(m1(t, 0, 1000 + i, 0x40000 + i * 32, 32, S_A, 3), 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.frees_unknown, 100);
    CHECK_EQ(st.live_blocks, 100);
    CHECK_EQ(st.frees_reordered, 0);
    /* Out-of-range heaps: a free is dropped, a malloc refused. */
    CHECK_EQ(hs_tracker_record_free(t, 300, 5000, 0x40000), 0);
    CHECK_EQ(stats(t).frees_unknown, 101);
    CHECK_EQ(hs_tracker_malloc(t, HS_TRACKER_MAX_HEAPS, 5001, 0x1, 1, 1, S_A, 3, 0), -1);
    CHECK_EQ(stats(t).mallocs, 100);
    CHECK_EQ(stats(t).live_blocks, 100);
    hs_tracker_free(t);
    check_context(NULL);
}

static int count_live(const uintptr_t *pcs, size_t n, uint64_t size, double objects,
                      uint64_t sampled, void *arg)
{
    (void)pcs;
    (void)n;
    (void)objects;
    uint64_t *acc = arg;
    acc[0]++;
    acc[1] += sampled;
    acc[2] += size;
    return 0;
}

static void test_heaps(void)
{
    check_context("heaps");
    struct hs_tracker *t = hs_tracker_new();
    CHECK_STREQ(hs_tracker_heap_name(t, 0), "libc.malloc");
    CHECK(hs_tracker_heap_name(t, 1) == NULL);
    CHECK(hs_tracker_heap_name(t, HS_TRACKER_MAX_HEAPS) == NULL);
    CHECK(!hs_tracker_heap_used(t, 0));
    CHECK_EQ(hs_tracker_set_heap(t, 1, "custom", 4096), 0);
    CHECK_EQ(hs_tracker_set_heap(t, HS_TRACKER_MAX_HEAPS, "x", 0), -1);
    CHECK_STREQ(hs_tracker_heap_name(t, 1), "custom");
    CHECK(!hs_tracker_heap_used(t, 1));
    char longname[100];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK_EQ(hs_tracker_set_heap(t, 2, longname, 0), 0);
    CHECK_EQ(strlen(hs_tracker_heap_name(t, 2)), HS_TRACKER_HEAP_NAME_MAX - 1);

    /* One address live in two heaps. */
    CHECK_EQ(m1(t, 0, 1, 0xABC0, 100, S_A, 3), 0);
    CHECK_EQ(m1(t, 1, 2, 0xABC0, 50, S_B, 3), 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.replaced, 0);
    CHECK_EQ(st.live_blocks, 2);
    CHECK_EQ(st.live_sampled_bytes, 150);
    CHECK(hs_tracker_heap_used(t, 0));
    CHECK(hs_tracker_heap_used(t, 1));
    CHECK(!hs_tracker_heap_used(t, 2));

    /* A free of heap 2 frees neither; heap 1's frees only heap 1's block. */
    CHECK_EQ(hs_tracker_record_free(t, 2, 3, 0xABC0), 0);
    CHECK_EQ(stats(t).live_blocks, 2);
    CHECK_EQ(hs_tracker_record_free(t, 1, 4, 0xABC0), 0);
    st = stats(t);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.live_sampled_bytes, 100);
    CHECK(hs_tracker_heap_name(t, 3) == NULL); /* a free does not make a heap */

    struct site_list l0 = sites_of(t, 0, false), l1 = sites_of(t, 1, false);
    CHECK_EQ(l0.n, 1);
    CHECK_EQ(l1.n, 1);
    CHECK_SITE(&l0, S_A, 3, 1, 100, 1, 100);
    CHECK_SITE(&l1, S_B, 3, 1, 50, 0, 0);
    free(l0.v);
    free(l1.v);
    uint64_t acc0[3] = {0}, acc1[3] = {0};
    CHECK_EQ(hs_tracker_foreach_live(t, 0, count_live, acc0), 0);
    CHECK_EQ(hs_tracker_foreach_live(t, 1, count_live, acc1), 0);
    CHECK_EQ(acc0[0], 1);
    CHECK_EQ(acc0[1], 100);
    CHECK_EQ(acc1[0], 0);

    /* An unnamed heap gets a name once used; heap 0 can be renamed. */
    CHECK_EQ(m1(t, 7, 5, 0x1, 1, S_C, 2), 0);
    CHECK(hs_tracker_heap_name(t, 7) != NULL && hs_tracker_heap_name(t, 7)[0] != '\0');
    CHECK_EQ(hs_tracker_set_heap(t, 0, "jemalloc", 0), 0);
    CHECK_STREQ(hs_tracker_heap_name(t, 0), "jemalloc");
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Dump at max against brute force ------------------------------------------------------ */

#define BF_HEAPS 3
#define BF_STACKS 40
#define BF_DEPTH 8
#define BF_OPS 100000

struct bf_block {
    uint32_t heap, stack;
    uint64_t addr;
    double objects;
    uint64_t sampled;
};

struct bf_model {
    uintptr_t stacks[BF_STACKS][BF_DEPTH];
    size_t depth[BF_STACKS];
    double alloc_obj[BF_HEAPS][BF_STACKS], alloc_bytes[BF_HEAPS][BF_STACKS];
    double inuse_obj[BF_HEAPS][BF_STACKS], inuse_bytes[BF_HEAPS][BF_STACKS];
    double peak_obj[BF_HEAPS][BF_STACKS], peak_bytes[BF_HEAPS][BF_STACKS];
    uint64_t live_bytes, peak, peak_ts;
};

static double bf_weight(uint64_t size, uint64_t sampled)
{
    return size == 0 || sampled <= size ? 1.0 : (double)sampled / (double)size;
}

static int bf_stack_of(const struct bf_model *m, const uintptr_t *pcs, size_t n)
{
    for (int s = 0; s < BF_STACKS; s++)
        if (m->depth[s] == n && memcmp(m->stacks[s], pcs, n * sizeof(*pcs)) == 0)
            return s;
    return -1;
}

/* Compares the tracker with the model; returns the number of (heap, callsite) pairs whose
 * values at the peak differ from their current ones. */
static size_t bf_compare(const struct hs_tracker *t, const struct bf_model *m, size_t num_live)
{
    size_t differ = 0;
    for (uint32_t h = 0; h < BF_HEAPS; h++) {
        for (int at_peak = 0; at_peak < 2; at_peak++) {
            struct site_list l = sites_of(t, h, at_peak);
            size_t expected = 0;
            for (int s = 0; s < BF_STACKS; s++)
                expected += m->alloc_obj[h][s] > 0;
            CHECK_EQ(l.n, expected);
            bool all_ok = true;
            for (size_t i = 0; i < l.n; i++) {
                const struct site_rec *r = &l.v[i];
                int s = bf_stack_of(m, r->pcs, r->n);
                if (!CHECK(s >= 0))
                    continue;
                double io = at_peak ? m->peak_obj[h][s] : m->inuse_obj[h][s];
                double ib = at_peak ? m->peak_bytes[h][s] : m->inuse_bytes[h][s];
                bool ok = near(r->v.alloc_objects, m->alloc_obj[h][s]) &&
                          r->v.alloc_bytes == m->alloc_bytes[h][s] &&
                          near(r->v.inuse_objects, io) && r->v.inuse_bytes == ib;
                if (!ok) {
                    fprintf(stderr,
                            "heap %u stack %d at_peak %d: got %g %g %g %g, want %g %g %g %g\n", h,
                            s, at_peak, r->v.alloc_objects, r->v.alloc_bytes, r->v.inuse_objects,
                            r->v.inuse_bytes, m->alloc_obj[h][s], m->alloc_bytes[h][s], io, ib);
                    all_ok = false;
                }
                if (at_peak && (m->peak_bytes[h][s] != m->inuse_bytes[h][s]))
                    differ++;
            }
            CHECK(all_ok);
            free(l.v);
        }
    }
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.live_sampled_bytes, m->live_bytes);
    CHECK_EQ(st.peak_sampled_bytes, m->peak);
    CHECK_EQ(st.peak_time_ns, m->peak_ts);
    CHECK_EQ(st.live_blocks, num_live);
    return differ;
}

static void bf_add(struct bf_model *m, const struct bf_block *b, int sign)
{
    m->inuse_obj[b->heap][b->stack] += sign * b->objects;
    m->inuse_bytes[b->heap][b->stack] += sign * (double)b->sampled;
    if (sign > 0)
        m->live_bytes += b->sampled;
    else
        m->live_bytes -= b->sampled;
}

static void test_peak_bruteforce(void)
{
    check_context("dump at max against brute force");
    rng_state = 0x5eed5eed12345ull;
    struct bf_model *m = calloc(1, sizeof(*m));
    struct bf_block *live = calloc(BF_OPS, sizeof(*live));
    uint64_t *freed = calloc(BF_OPS * 2, sizeof(*freed));
    size_t num_live = 0, num_freed = 0;
    /* Distinct stacks over few pcs, so that they share prefixes. */
    for (int s = 0; s < BF_STACKS; s++) {
        do {
            m->depth[s] = 1 + rnd() % BF_DEPTH;
            for (size_t i = 0; i < m->depth[s]; i++)
                m->stacks[s][i] = 0x400000 + (rnd() % 6) * 0x10;
        } while (bf_stack_of(m, m->stacks[s], m->depth[s]) != s);
    }
    struct hs_tracker *t = hs_tracker_new();
    uint64_t seq = 1, next_addr = 0x10000000;
    size_t differ = 0;
    bool rc_ok = true;
    for (uint64_t op = 0; op < BF_OPS; op++) {
        uint64_t ts = 1000 + op;
        double p_malloc = op < BF_OPS / 2 ? 0.56 : 0.44;
        if (num_live == 0 || rnd_unit() < p_malloc) {
            struct bf_block b;
            b.heap = (uint32_t)(rnd() % BF_HEAPS);
            b.stack = (uint32_t)(rnd() % BF_STACKS);
            uint64_t size = 1 + rnd() % 2048;
            switch (rnd() % 4) {
            case 0:
                b.sampled = 0;
                break;
            case 1:
                b.sampled = 4096 * (1 + rnd() % 3);
                break;
            default:
                b.sampled = size;
                break;
            }
            b.objects = bf_weight(size, b.sampled);
            const uintptr_t *pcs = m->stacks[b.stack];
            size_t n = m->depth[b.stack];
            unsigned kind = (unsigned)(rnd() % 100);
            size_t victim = SIZE_MAX;
            if (kind >= 5 && kind < 8 && num_live > 0) {
                for (int tries = 0; tries < 4 && victim == SIZE_MAX; tries++) {
                    size_t i = rnd() % num_live;
                    if (live[i].heap == b.heap)
                        victim = i;
                }
            }
            if (kind < 5) {
                /* A malloc-free pair whose free arrives first. */
                b.addr = num_freed && rnd() % 2 ? freed[--num_freed] : (next_addr += 16);
                rc_ok &= hs_tracker_record_free(t, b.heap, seq + 1, b.addr) == 0;
                rc_ok &=
                    hs_tracker_malloc(t, b.heap, seq, b.addr, size, b.sampled, pcs, n, ts) == 0;
                seq += 2;
                freed[num_freed++] = b.addr;
            } else if (victim != SIZE_MAX) {
                /* A malloc over a live block whose free was lost. */
                b.addr = live[victim].addr;
                rc_ok &=
                    hs_tracker_malloc(t, b.heap, seq++, b.addr, size, b.sampled, pcs, n, ts) == 0;
                bf_add(m, &live[victim], -1);
                live[victim] = b;
                bf_add(m, &b, +1);
            } else {
                b.addr = num_freed && rnd() % 3 == 0 ? freed[--num_freed] : (next_addr += 16);
                rc_ok &=
                    hs_tracker_malloc(t, b.heap, seq++, b.addr, size, b.sampled, pcs, n, ts) == 0;
                live[num_live++] = b;
                bf_add(m, &b, +1);
            }
            m->alloc_obj[b.heap][b.stack] += b.objects;
            m->alloc_bytes[b.heap][b.stack] += (double)b.sampled;
        } else {
            size_t i = rnd() % num_live;
            rc_ok &= hs_tracker_record_free(t, live[i].heap, seq++, live[i].addr) == 0;
            bf_add(m, &live[i], -1);
            freed[num_freed++] = live[i].addr;
            live[i] = live[--num_live];
        }
        if (m->live_bytes > m->peak) {
            m->peak = m->live_bytes;
            m->peak_ts = ts;
            memcpy(m->peak_obj, m->inuse_obj, sizeof(m->peak_obj));
            memcpy(m->peak_bytes, m->inuse_bytes, sizeof(m->peak_bytes));
        }
        if ((op + 1) % 25000 == 0)
            differ = bf_compare(t, m, num_live);
    }
    CHECK(rc_ok);
    /* The peak was in the middle: many callsites have moved since. */
    CHECK(differ > 20);
    CHECK(m->peak > m->live_bytes);
    struct hs_tracker_stats st = stats(t);
    CHECK(st.frees_reordered > 1000);
    CHECK(st.replaced > 100);
    CHECK_EQ(st.frees_unknown + st.pending_dropped, 0);
    hs_tracker_free(t);
    free(m);
    free(live);
    free(freed);
    check_context(NULL);
}

/* ---- Memory ------------------------------------------------------------------------------ */

static void test_memory(void)
{
    check_context("memory accounting");
    struct hs_tracker *t = hs_tracker_new();
    size_t m0 = hs_tracker_memory(t);
    CHECK(m0 > 0);
    uintptr_t pcs[4] = {0, 0x2, 0x3, 0x4};
    for (uint64_t i = 0; i < 10000; i++) {
        pcs[0] = 0x1000 + i;
        CHECK_EQ(m1(t, 0, i + 1, 0x100000 + i * 16, 16, pcs, 4), 0);
    }
    size_t m1_ = hs_tracker_memory(t);
    /* 10,003 nodes, 10,000 sites and live blocks at least. */
    CHECK(m1_ > m0 + 10000 * (16 + 64 + 40));
    for (uint64_t i = 0; i < 1000; i++)
        CHECK_EQ(hs_tracker_record_free(t, 0, 100000 + i, 0x900000 + i * 16), 0);
    CHECK(hs_tracker_memory(t) > m1_);
    /* A heap that is only named costs little. */
    size_t m2 = hs_tracker_memory(t);
    for (uint32_t h = 1; h < HS_TRACKER_MAX_HEAPS; h++)
        CHECK_EQ(hs_tracker_set_heap(t, h, "h", 0), 0);
    CHECK(hs_tracker_memory(t) < m2 + 255 * 256);
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Allocation failures ---------------------------------------------------------------- */

struct script_op {
    bool is_free;
    uint32_t heap;
    uint64_t seq, addr, size;
    uintptr_t pcs[6];
    size_t n;
};

static size_t make_script(struct script_op *ops, size_t cap)
{
    size_t n = 0;
    rng_state = 0xfa11fa11ull;
    uint64_t seq = 1;
    while (n < cap) {
        struct script_op o = {0};
        o.heap = (uint32_t)(rnd() % 3);
        o.addr = 0x1000 + (rnd() % 6000) * 16;
        o.size = 1 + rnd() % 500;
        o.n = rnd() % 6;
        for (size_t f = 0; f < o.n; f++)
            o.pcs[f] = 0x5000 + (rnd() % 200);
        unsigned k = (unsigned)(rnd() % 10);
        o.is_free = k < 4;
        o.seq = k == 9 ? seq + 5 : seq; /* some out of order */
        seq++;
        ops[n++] = o;
    }
    return n;
}

static int run_op(struct hs_tracker *t, const struct script_op *o)
{
    if (o->is_free)
        return hs_tracker_record_free(t, o->heap, o->seq, o->addr);
    return hs_tracker_malloc(t, o->heap, o->seq, o->addr, o->size, o->size * 3, o->pcs, o->n,
                             o->seq);
}

static bool same_stats(const struct hs_tracker_stats *a, const struct hs_tracker_stats *b,
                       bool callsites)
{
    return a->mallocs == b->mallocs && a->frees == b->frees &&
           a->frees_unknown == b->frees_unknown && a->frees_reordered == b->frees_reordered &&
           a->replaced == b->replaced && a->pending_dropped == b->pending_dropped &&
           (!callsites || a->callsites == b->callsites) && a->live_blocks == b->live_blocks &&
           a->live_sampled_bytes == b->live_sampled_bytes &&
           a->peak_sampled_bytes == b->peak_sampled_bytes && a->peak_time_ns == b->peak_time_ns;
}

static bool same_sites(const struct hs_tracker *a, const struct hs_tracker *b)
{
    bool ok = true;
    for (uint32_t h = 0; h < 3; h++) {
        for (int p = 0; p < 2; p++) {
            struct site_list x = sites_of(a, h, p), y = sites_of(b, h, p);
            ok &= x.n == y.n;
            for (size_t i = 0; ok && i < x.n; i++) {
                const struct site_rec *r = find_site(&y, x.v[i].pcs, x.v[i].n);
                ok &= r && memcmp(&r->v, &x.v[i].v, sizeof(r->v)) == 0;
            }
            free(x.v);
            free(y.v);
        }
    }
    return ok;
}

static void test_alloc_failures(void)
{
    check_context("allocation failures");
    /* hs_tracker_new itself. */
    for (long k = 1; k < 8; k++) {
        fail_fired = false;
        fail_countdown = k;
        struct hs_tracker *t = hs_tracker_new();
        fail_countdown = 0;
        CHECK(fail_fired ? t == NULL : t != NULL);
        hs_tracker_free(t);
    }

    static struct script_op ops[20000];
    size_t n = make_script(ops, 20000);
    struct hs_tracker *ref = hs_tracker_new(), *t = hs_tracker_new();
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(run_op(ref, &ops[i]), 0);

    size_t failures = 0;
    bool consistent = true, results_ok = true;
    for (size_t i = 0; i < n; i++) {
        for (long k = 1;; k++) {
            struct hs_tracker_stats before = stats(t);
            fail_fired = false;
            fail_countdown = k;
            int rc = run_op(t, &ops[i]);
            fail_countdown = 0;
            if (!fail_fired) {
                results_ok &= rc == 0;
                break;
            }
            failures++;
            results_ok &= rc == -1 && errno == ENOMEM;
            struct hs_tracker_stats after = stats(t);
            consistent &= same_stats(&before, &after, false);
        }
    }
    CHECK(failures > 50); /* every table grew several times */
    CHECK(results_ok);
    CHECK(consistent);
    struct hs_tracker_stats a = stats(ref), b = stats(t);
    CHECK(same_stats(&a, &b, true));
    CHECK(same_sites(ref, t));
    hs_tracker_free(ref);
    hs_tracker_free(t);
    check_context(NULL);
}

/* ---- Hostile input ---------------------------------------------------------------------- */

static uint64_t pick(void)
{
    switch (rnd() % 6) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX;
    case 2:
        return rnd();
    case 3:
        return rnd() % 16;
    default:
        return rnd() % 100000;
    }
}

struct live_sum {
    uint64_t blocks, sampled;
    bool ok;
};

static int sum_live(const uintptr_t *pcs, size_t n, uint64_t size, double objects, uint64_t sampled,
                    void *arg)
{
    (void)size;
    struct live_sum *s = arg;
    s->blocks++;
    s->sampled += sampled;
    s->ok &= n <= HS_TRACKER_MAX_FRAMES && (n == 0 || pcs != NULL) && objects >= 1;
    return 0;
}

struct site_sum {
    uint64_t sites;
    bool ok;
};

static int sum_sites(const uintptr_t *pcs, size_t n, const struct hs_callsite_values *v, void *arg)
{
    struct site_sum *s = arg;
    s->sites++;
    s->ok &= n <= HS_TRACKER_MAX_FRAMES && (n == 0 || pcs != NULL) && v->alloc_objects >= 1;
    return 0;
}

static void test_hostile(void)
{
    check_context("hostile sequence");
    rng_state = 0xbadc0ffee0ddf00dull;
    struct hs_tracker *t = hs_tracker_new();
    uint64_t addrs[64];
    for (size_t i = 0; i < 64; i++)
        addrs[i] = pick();
    static uintptr_t pcs[1000];
    bool rc_ok = true;
    uint64_t refused = 0, attempted = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        uint32_t heap = rnd() % 8 == 0 ? (uint32_t)(rnd() % 300) : (uint32_t)(rnd() % 3);
        if (rnd() % 1000 == 0)
            heap = UINT32_MAX;
        uint64_t seq = rnd() % 2 ? pick() : i;
        uint64_t addr = rnd() % 4 ? addrs[rnd() % 64] : pick();
        if (rnd() % 3 == 0) {
            rc_ok &= hs_tracker_record_free(t, heap, seq, addr) == 0;
            continue;
        }
        size_t n = rnd() % 12;
        if (rnd() % 200 == 0)
            n = rnd() % 1000;
        for (size_t f = 0; f < n; f++)
            pcs[f] = n > 12 ? (uintptr_t)rnd() : (uintptr_t)(rnd() % 8) * (UINTPTR_MAX / 7);
        const uintptr_t *p = rnd() % 50 == 0 ? NULL : pcs;
        int rc = hs_tracker_malloc(t, heap, seq, addr, pick(), pick(), p, n, pick());
        attempted++;
        if (heap >= HS_TRACKER_MAX_HEAPS) {
            rc_ok &= rc == -1;
            refused++;
        } else {
            rc_ok &= rc == 0;
        }
    }
    CHECK(rc_ok);
    CHECK(refused > 0);
    struct hs_tracker_stats st = stats(t);
    CHECK_EQ(st.mallocs + refused, attempted);
    struct live_sum ls = {0, 0, true};
    struct site_sum ss = {0, true};
    for (uint32_t h = 0; h < HS_TRACKER_MAX_HEAPS; h++) {
        CHECK_EQ(hs_tracker_foreach_live(t, h, sum_live, &ls), 0);
        CHECK_EQ(hs_tracker_foreach(t, h, h % 2 == 0, sum_sites, &ss), 0);
        if (hs_tracker_heap_used(t, h))
            CHECK(hs_tracker_heap_name(t, h) != NULL);
    }
    CHECK(ls.ok);
    CHECK(ss.ok);
    CHECK_EQ(ls.blocks, st.live_blocks);
    CHECK_EQ(ls.sampled, st.live_sampled_bytes);
    CHECK(ss.sites > 0 && ss.sites <= st.mallocs);
    CHECK(hs_tracker_memory(t) < ((size_t)1 << 30));
    /* Free everything live, heap by heap, with the largest sequence number. */
    for (size_t i = 0; i < 64; i++)
        for (uint32_t h = 0; h < HS_TRACKER_MAX_HEAPS; h++)
            hs_tracker_record_free(t, h, UINT64_MAX, addrs[i]);
    hs_tracker_free(t);
    hs_tracker_free(NULL);
    check_context(NULL);
}

int main(void)
{
    test_trie();
    test_new_pcs();
    test_early_stop();
    test_totals_exact();
    test_weights();
    test_exact_zero();
    test_peak_first();
    test_reordered();
    test_stale();
    test_reuse();
    test_replaced();
    test_pending_overflow();
    test_unknown();
    test_heaps();
    test_peak_bruteforce();
    test_memory();
    test_alloc_failures();
    test_hostile();
    return check_report();
}
