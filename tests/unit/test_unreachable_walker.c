/* test_unreachable_walker.c: the heap walker (src/memunreachable/heap_walker.c): allocation
 * index and lookup, marking from root ranges and register values, interior pointers, one past
 * the end, alignment, deep chains and cycles, glibc chunk pointers in malloc-state roots, and
 * the fault guard (PROT_NONE blocks and root
 * pages, faults outside the guarded range still crash).
 */
#define _GNU_SOURCE
#include "check.h"
#include "heap_walker.h"
#include "log.h"
#include "test_unreachable_fake_heap.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static struct hs_arena g_arena;

static char g_log[64][512];
static size_t g_nlog;

static void sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    if (g_nlog >= 64)
        return;
    if (len >= sizeof(g_log[0]))
        len = sizeof(g_log[0]) - 1;
    memcpy(g_log[g_nlog], line, len);
    g_log[g_nlog][len] = '\0';
    g_nlog++;
}

static void build(struct hs_mu_heap_walker *w)
{
    hs_mu_heap_walker_init(w, &g_arena);
    CHECK_EQ(hs_mu_heap_walker_collect(w, &g_fake_heap), 0);
    CHECK_EQ(hs_mu_heap_walker_finish(w), 0);
}

static size_t index_of(const struct hs_mu_heap_walker *w, const void *p)
{
    for (size_t i = 0; i < w->num_allocs; i++)
        if (w->allocs[i].begin == (uintptr_t)p)
            return i;
    return HS_MU_NONE;
}

static bool marked(const struct hs_mu_heap_walker *w, const void *p)
{
    size_t i = index_of(w, p);
    return i != HS_MU_NONE && hs_mu_heap_walker_is_marked(w, i);
}

/* ---- Lookup ---------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static size_t reference_find(const uintptr_t *b, const uintptr_t *e, size_t n, uintptr_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && b[lo] <= a ? lo : HS_MU_NONE;
}

static void test_lookup_random(void)
{
    check_context("lookup against a reference, random layout with big blocks");
    /* Fake addresses only: nothing is read. */
    enum { N = 20000 };
    static uintptr_t begins[N], ends[N];
    static bool zero[N];
    fake_reset();
    uintptr_t cur = 0x10000000;
    for (size_t i = 0; i < N; i++) {
        cur += (rnd() % 4 == 0) ? (rnd() % 70000) : 16 * (rnd() % 3);
        size_t size;
        switch (rnd() % 20) {
        case 0:
            /* Across page ends; now and then more than HS_MU_BIG_PAGES pages. */
            size = rnd() % 50 == 0 ? (HS_MU_BIG_PAGES + 1 + rnd() % 8) * HS_MU_PAGE_BYTES
                                   : 300000 + rnd() % 3000000;
            break;
        case 1:
            size = 0; /* counts as one byte */
            break;
        default:
            size = 1 + rnd() % 3000;
        }
        zero[i] = size == 0;
        begins[i] = cur;
        ends[i] = cur + (size ? size : 1);
        cur = (ends[i] + 15) & ~(uintptr_t)15;
    }
    /* Insert in a shuffled order. */
    static uint32_t order[N];
    for (size_t i = 0; i < N; i++)
        order[i] = (uint32_t)i;
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < N; i++) {
        size_t k = order[i];
        fake_add((void *)begins[k], zero[k] ? 0 : ends[k] - begins[k]);
    }
    struct hs_mu_heap_walker w;
    build(&w);
    CHECK_EQ(w.num_allocs, N);
    CHECK(w.num_big > 0);
    bool sorted = true;
    for (size_t i = 0; i < w.num_allocs; i++)
        sorted &= w.allocs[i].begin == begins[i] && w.allocs[i].end == ends[i];
    CHECK(sorted);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        uintptr_t probes[] = {begins[i], ends[i] - 1, ends[i], begins[i] - 1,
                              begins[i] + (ends[i] - begins[i]) / 2};
        for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
            bad +=
                hs_mu_heap_walker_find(&w, probes[k]) != reference_find(begins, ends, N, probes[k]);
    }
    for (size_t k = 0; k < 200000; k++) {
        uintptr_t a = begins[0] - 100 + rnd() % (ends[N - 1] - begins[0] + 200);
        bad += hs_mu_heap_walker_find(&w, a) != reference_find(begins, ends, N, a);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_mu_heap_walker_find(&w, 0), HS_MU_NONE);
    CHECK_EQ(hs_mu_heap_walker_find(&w, UINTPTR_MAX), HS_MU_NONE);
    CHECK_EQ(hs_mu_heap_walker_first_ending_after(&w, begins[5]), 5);
    CHECK_EQ(hs_mu_heap_walker_first_ending_after(&w, ends[5] - 1), 5);
    CHECK_EQ(hs_mu_heap_walker_first_ending_after(&w, ends[5]), 6);
    CHECK_EQ(hs_mu_heap_walker_first_ending_after(&w, ends[N - 1]), N);
    size_t bytes = 0;
    for (size_t i = 0; i < N; i++)
        bytes += ends[i] - begins[i];
    CHECK_EQ(w.allocation_bytes, bytes);
    hs_mu_heap_walker_destroy(&w);
}

/* ---- A source that lists every block at once (heap->list) ------------------------------- */

static size_t g_list_short; /* the count answered is this much too low (a heap that grew) */
static size_t g_list_calls;
static bool g_list_fails;

static size_t fake_list(uintptr_t (*out)[2], size_t cap)
{
    g_list_calls++;
    if (g_list_fails)
        return SIZE_MAX;
    if (!out)
        return g_fake_n > g_list_short ? g_fake_n - g_list_short : 0;
    for (size_t i = 0; i < g_fake_n && i < cap; i++) { /* backwards, as fake_iterate */
        out[i][0] = ~g_fake[g_fake_n - 1 - i].enc;
        out[i][1] = g_fake[g_fake_n - 1 - i].size;
    }
    return g_fake_n;
}

static void test_listed_source(void)
{
    check_context("a source listing every block at once builds the same walker as iterate");
    enum { N = 20000 };
    fake_reset();
    uintptr_t cur = 0x7f0000000000;
    for (size_t i = 0; i < N; i++) {
        cur += 16 * (rnd() % 4);
        size_t size = rnd() % 10 == 0 ? 0 : rnd() % 10 == 0 ? 300000 + rnd() % 3000000
                                                             : 1 + rnd() % 3000;
        fake_add((void *)cur, size);
        cur = (cur + (size ? size : 1) + 15) & ~(uintptr_t)15;
    }
    fake_add((void *)(UINTPTR_MAX - 31), 64); /* wraps: clipped at the top */
    struct hs_mu_heap_walker a, b;
    build(&a);
    const struct hs_mu_heap_source listed = {.list = fake_list, .backtrace = fake_backtrace};
    for (int round = 0; round < 2; round++) {
        /* Round 1: the first count is short, so the first listing does not fit. */
        g_list_short = round ? N - 1000 : 0;
        g_list_calls = 0;
        hs_mu_heap_walker_init(&b, &g_arena);
        CHECK_EQ(hs_mu_heap_walker_collect(&b, &listed), 0);
        CHECK_EQ(hs_mu_heap_walker_finish(&b), 0);
        CHECK_EQ(g_list_calls, round ? 3u : 2u);
        CHECK_EQ(b.num_allocs, a.num_allocs);
        CHECK_EQ(b.num_allocs, N + 1);
        CHECK_EQ(b.allocation_bytes, a.allocation_bytes);
        CHECK_EQ(b.num_big, a.num_big);
        size_t differ = 0;
        for (size_t i = 0; i < a.num_allocs && i < b.num_allocs; i++)
            differ += a.allocs[i].begin != b.allocs[i].begin || a.allocs[i].end != b.allocs[i].end;
        for (size_t k = 0; k < 100000; k++) {
            uintptr_t x = a.min - 100 + rnd() % (a.allocs[N - 1].end - a.min + 200);
            differ += hs_mu_heap_walker_find(&a, x) != hs_mu_heap_walker_find(&b, x);
        }
        CHECK_EQ(differ, 0);
        CHECK_EQ(b.allocs[N].end, UINTPTR_MAX);
        hs_mu_heap_walker_destroy(&b);
    }
    g_list_short = 0;
    g_list_fails = true;
    hs_mu_heap_walker_init(&b, &g_arena);
    CHECK_EQ(hs_mu_heap_walker_collect(&b, &listed), -ENOTSUP);
    hs_mu_heap_walker_destroy(&b);
    g_list_fails = false;
    hs_mu_heap_walker_destroy(&a);
}

/* As malloc debug lists (pointer_table.c): 64 MiB region by region, newest region first, in
 * address order within each; g_region_first gives the regions' order. */
static uintptr_t g_region_first[64];
static size_t g_num_regions;

static size_t region_list(uintptr_t (*out)[2], size_t cap)
{
    if (!out)
        return g_fake_n;
    size_t n = 0;
    for (size_t r = 0; r < g_num_regions; r++) {
        uintptr_t lo = g_region_first[r], hi = lo + ((uintptr_t)1 << 26);
        for (size_t i = 0; i < g_fake_n; i++) { /* the table is in address order */
            uintptr_t p = ~g_fake[i].enc;
            if (p >= lo && p < hi) {
                if (n < cap) {
                    out[n][0] = p;
                    out[n][1] = g_fake[i].size;
                }
                n++;
            }
        }
    }
    return n;
}

static void test_listed_in_regions(void)
{
    check_context("a list in malloc debug's region order is sorted in place, same walker");
    enum { N = 30000 };
    fake_reset();
    /* A heap grown upwards over 6 regions (blocks running over region ends, a few covering
     * several pages or more than HS_MU_BIG_PAGES of them), and a mapping far above. */
    uintptr_t base = 0x560000000000, cur = base + 0x50;
    for (size_t i = 0; i < N; i++) {
        size_t size = rnd() % 500 == 0 ? 3000000 + rnd() % 3000000
                      : i == N / 2  ? 200u << 20
                                    : 1 + rnd() % 20000;
        fake_add((void *)cur, size);
        cur = (cur + size + 16 + 15) & ~(uintptr_t)15;
    }
    uintptr_t far = 0x7f1234560000;
    fake_add((void *)far, 80u << 20);
    uintptr_t top = cur >> 26;
    g_num_regions = 0;
    for (uintptr_t r = top; r >= base >> 26; r--) {
        g_region_first[g_num_regions++] = r << 26;
        if (r == (base >> 26) + 1) /* the far mapping was made before the heap's second region */
            g_region_first[g_num_regions++] = far & ~(((uintptr_t)1 << 26) - 1);
    }
    CHECK(g_num_regions > 6);
    struct hs_mu_heap_walker a, b;
    build(&a); /* from fake_iterate: backwards, so by the general sort */
    CHECK(!a.sorted_in_place);
    const struct hs_mu_heap_source listed = {.list = region_list, .backtrace = fake_backtrace};
    hs_mu_heap_walker_init(&b, &g_arena);
    CHECK_EQ(hs_mu_heap_walker_collect(&b, &listed), 0);
    CHECK_EQ(hs_mu_heap_walker_finish(&b), 0);
    CHECK(b.sorted_in_place);
    CHECK_EQ(b.num_allocs, N + 1);
    CHECK_EQ(b.num_allocs, a.num_allocs);
    CHECK_EQ(b.allocation_bytes, a.allocation_bytes);
    CHECK_EQ(b.num_big, a.num_big);
    CHECK(b.num_big > 0);
    size_t differ = 0;
    for (size_t i = 0; i < a.num_allocs && i < b.num_allocs; i++)
        differ += a.allocs[i].begin != b.allocs[i].begin || a.allocs[i].end != b.allocs[i].end;
    for (size_t i = 0; i < a.num_allocs; i++) {
        uintptr_t probes[] = {a.allocs[i].begin, a.allocs[i].end - 1, a.allocs[i].end,
                              a.allocs[i].begin - 1, a.allocs[i].begin + (a.allocs[i].end - a.allocs[i].begin) / 2};
        for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
            differ += hs_mu_heap_walker_find(&a, probes[k]) != hs_mu_heap_walker_find(&b, probes[k]);
    }
    for (size_t k = 0; k < 200000; k++) {
        uintptr_t x = base - 4096 + rnd() % (cur - base + 8192);
        differ += hs_mu_heap_walker_find(&a, x) != hs_mu_heap_walker_find(&b, x);
    }
    CHECK_EQ(differ, 0);
    CHECK_EQ(hs_mu_heap_walker_find(&b, far + 12345), b.num_allocs - 1);
    hs_mu_heap_walker_destroy(&b);
    hs_mu_heap_walker_destroy(&a);
}

/* Lists the n ranges [b[i], e[i]) in a shuffled order, builds the walker, and compares its
 * lookups with reference_find at every begin and end, around them, and at random addresses. */
static size_t lookup_mismatches(struct hs_mu_heap_walker *w, const uintptr_t *b, const uintptr_t *e,
                                size_t n)
{
    fake_reset();
    static uint32_t order[1 << 18];
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        fake_add((void *)b[order[i]], e[order[i]] - b[order[i]]);
    build(w);
    size_t bad = w->num_allocs != n;
    for (size_t i = 0; i < n && !bad; i++)
        bad += w->allocs[i].begin != b[i] || w->allocs[i].end != e[i];
    for (size_t i = 0; i < n; i++) {
        uintptr_t probes[] = {b[i], e[i] - 1, e[i], b[i] - 1, b[i] + (e[i] - b[i]) / 2};
        for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
            bad += hs_mu_heap_walker_find(w, probes[k]) != reference_find(b, e, n, probes[k]);
    }
    for (size_t k = 0; k < 100000; k++) {
        uintptr_t a = b[0] - 4096 + rnd() % (e[n - 1] - b[0] + 8192);
        bad += hs_mu_heap_walker_find(w, a) != reference_find(b, e, n, a);
    }
    return bad;
}

static void test_lookup_layouts(void)
{
    /* Fake addresses only: nothing is read. */
    enum { MAX = 1 << 18 };
    static uintptr_t b[MAX], e[MAX];
    struct hs_mu_heap_walker w;
    const uintptr_t page = HS_MU_PAGE_BYTES, base = 0x7f0000000000;

    check_context("dense pages: 32-byte blocks filling two pages and running into a third");
    size_t n = 0;
    for (uintptr_t a = base + 16; n < 2 * page / 32 + 100; a += 32, n++)
        b[n] = a, e[n] = a + 24;
    CHECK_EQ(lookup_mismatches(&w, b, e, n), 0);
    CHECK(w.num_slot_words > 0);
    hs_mu_heap_walker_destroy(&w);

    check_context("unaligned blocks, many in one slot");
    n = 0;
    for (uintptr_t a = base + 3; n < 5000; n++) {
        b[n] = a;
        e[n] = a + 1 + rnd() % 5;
        a = e[n] + rnd() % 3;
    }
    CHECK_EQ(lookup_mismatches(&w, b, e, n), 0);
    hs_mu_heap_walker_destroy(&w);

    check_context(
        "pages with exactly HS_MU_PAGE_RUN blocks and one more, each across its page end");
    n = 0;
    for (unsigned p = 0; p < 40; p++) {
        uintptr_t a = base + p * page + page / 2;
        unsigned count = p % 2 ? HS_MU_PAGE_RUN : HS_MU_PAGE_RUN + 1;
        for (unsigned k = 0; k < count; k++, n++) {
            b[n] = a;
            e[n] = k + 1 == count ? base + (p + 1) * page + 4096 : a + 1000;
            a = e[n] + 16;
        }
    }
    CHECK_EQ(lookup_mismatches(&w, b, e, n), 0);
    hs_mu_heap_walker_destroy(&w);

    check_context("clustered: a dense slot, then a block covering the rest of the page and more");
    n = 0;
    for (unsigned k = 0; k < 200; k++, n++)
        b[n] = base + 32 * k, e[n] = base + 32 * k + 16;
    b[n] = base + 8192, e[n] = base + 3 * page + 77, n++;
    b[n] = base + 3 * page + 80, e[n] = base + 3 * page + 96, n++;
    b[n] = base + 4 * page, e[n] = base + (HS_MU_BIG_PAGES + 10) * page, n++; /* big */
    b[n] = base + (HS_MU_BIG_PAGES + 10) * page, e[n] = b[n] + 1, n++;
    CHECK_EQ(lookup_mismatches(&w, b, e, n), 0);
    CHECK_EQ(w.num_big, 1);
    hs_mu_heap_walker_destroy(&w);

    check_context("a block ending at the top of the address space");
    b[0] = base, e[0] = base + 64;
    b[1] = UINTPTR_MAX - 3 * page, e[1] = UINTPTR_MAX;
    CHECK_EQ(lookup_mismatches(&w, b, e, 2), 0);
    CHECK_EQ(hs_mu_heap_walker_find(&w, UINTPTR_MAX - 1), 1);
    hs_mu_heap_walker_destroy(&w);
}

static void test_lookup_overlaps(void)
{
    check_context("overlapping blocks dropped from dense pages, lookups of the rest");
    enum { N = 30000 };
    static uintptr_t b[N], e[N], kb[N], ke[N];
    fake_reset();
    uintptr_t a = 0x500000000000;
    for (size_t i = 0; i < N; i++) {
        b[i] = a;
        e[i] = a + 16 + 16 * (rnd() % 4);
        a += rnd() % 16 == 0 ? 16 : e[i] - b[i] + 16; /* now and then inside the previous one */
    }
    size_t kept = 0;
    for (size_t i = 0; i < N; i++) {
        if (kept > 0 && b[i] < ke[kept - 1])
            continue;
        kb[kept] = b[i];
        ke[kept++] = e[i];
    }
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        fake_add((void *)b[j], e[j] - b[j]);
        b[j] = b[i], e[j] = e[i];
    }
    fake_add((void *)b[0], e[0] - b[0]);
    struct hs_mu_heap_walker w;
    hs_log_set_sink(sink, NULL);
    build(&w);
    hs_log_set_sink(NULL, NULL);
    CHECK_EQ(w.num_allocs, kept);
    CHECK_EQ(w.dropped_overlapping, N - kept);
    size_t bad = 0;
    for (size_t i = 0; i < kept; i++) {
        bad += w.allocs[i].begin != kb[i];
        uintptr_t probes[] = {kb[i], ke[i] - 1, ke[i], kb[i] - 1};
        for (size_t k = 0; k < 4; k++)
            bad += hs_mu_heap_walker_find(&w, probes[k]) != reference_find(kb, ke, kept, probes[k]);
    }
    CHECK_EQ(bad, 0);
    hs_mu_heap_walker_destroy(&w);
}

static void test_lookup_edges(void)
{
    check_context("empty heap, overlap, zero size");
    fake_reset();
    struct hs_mu_heap_walker w;
    build(&w);
    CHECK_EQ(w.num_allocs, 0);
    CHECK_EQ(hs_mu_heap_walker_find(&w, 0x1000), HS_MU_NONE);
    CHECK(hs_mu_heap_walker_add_root(&w, 0x1000, 0x1000)); /* empty: ignored */
    hs_mu_heap_walker_mark(&w);                            /* nothing to do, no crash */
    hs_mu_heap_walker_destroy(&w);

    fake_reset();
    fake_add((void *)0x100000, 100);
    fake_add((void *)0x100010, 100); /* overlaps the first: dropped */
    fake_add((void *)0x200000, 0);
    g_nlog = 0;
    hs_log_set_sink(sink, NULL);
    build(&w);
    hs_log_set_sink(NULL, NULL);
    CHECK_EQ(w.num_allocs, 2);
    CHECK_EQ(w.dropped_overlapping, 1);
    CHECK_EQ(g_nlog, 1);
    CHECK(strstr(g_log[0], "overlaps") != NULL);
    CHECK_EQ(hs_mu_heap_walker_find(&w, 0x200000), 1);
    CHECK_EQ(hs_mu_heap_walker_find(&w, 0x200001), HS_MU_NONE);
    CHECK_EQ(w.allocs[1].end - w.allocs[1].begin, 1);
    hs_mu_heap_walker_destroy(&w);
}

/* ---- Marking ------------------------------------------------------------------------- */

static void test_mark_basic(void)
{
    check_context("interior pointers, one past the end, alignment, registers");
    fake_reset();
    uintptr_t *root = fake_carve(64); /* not a block: a root range */
    uintptr_t *a = fake_block(64), *b = fake_block(64), *c = fake_block(64);
    uintptr_t *d = fake_block(64), *e = fake_block(64), *f = fake_block(64);
    uintptr_t *g = fake_block(64), *r = fake_block(48), *s = fake_block(24);
    root[0] = (uintptr_t)a + 40; /* interior pointer into a */
    a[3] = (uintptr_t)b + 63;    /* last byte of b */
    root[1] = (uintptr_t)c + 64; /* one past the end of c: not a reference */
    b[0] = (uintptr_t)e;         /* a -> b -> e */
    /* d referenced only from a misaligned word of root. */
    uintptr_t dp = (uintptr_t)d;
    memcpy((uint8_t *)root + 17, &dp, sizeof(dp));
    f[0] = (uintptr_t)g; /* f -> g, f unreferenced: both unreached */
    r[5] = (uintptr_t)s; /* r reached through a register value, s through r */

    struct hs_mu_heap_walker w;
    build(&w);
    CHECK(hs_mu_heap_walker_add_root(&w, (uintptr_t)root, (uintptr_t)root + 64));
    CHECK(hs_mu_heap_walker_add_root_value(&w, (uintptr_t)r + 47));
    CHECK(hs_mu_heap_walker_add_root_value(&w, (uintptr_t)s + 24)); /* one past: no */
    hs_mu_heap_walker_mark(&w);
    CHECK(marked(&w, a));
    CHECK(marked(&w, b));
    CHECK(!marked(&w, c));
    CHECK(!marked(&w, d));
    CHECK(marked(&w, e));
    CHECK(!marked(&w, f));
    CHECK(!marked(&w, g));
    CHECK(marked(&w, r));
    CHECK(marked(&w, s));
    CHECK_EQ(w.num_marked, 5);
    hs_mu_heap_walker_destroy(&w);

    check_context("root range ends are rounded inwards to whole words");
    fake_reset();
    root = fake_carve(64);
    a = fake_block(32);
    b = fake_block(32);
    root[0] = (uintptr_t)a;
    root[2] = (uintptr_t)b;
    build(&w);
    /* [root + 1, root + 23): root[0] is not whole inside, root[1] is, root[2] is not. */
    CHECK(hs_mu_heap_walker_add_root(&w, (uintptr_t)root + 1, (uintptr_t)root + 23));
    hs_mu_heap_walker_mark(&w);
    CHECK(!marked(&w, a));
    CHECK(!marked(&w, b));
    hs_mu_heap_walker_destroy(&w);
}

static void test_mark_cycles_and_chains(void)
{
    check_context("1000-block cycle, reached and not");
    fake_reset();
    enum { CYCLE = 1000 };
    uintptr_t *blocks[CYCLE], *other[CYCLE];
    for (size_t i = 0; i < CYCLE; i++)
        blocks[i] = fake_block(32);
    for (size_t i = 0; i < CYCLE; i++)
        other[i] = fake_block(32);
    for (size_t i = 0; i < CYCLE; i++) {
        blocks[i][1] = (uintptr_t)blocks[(i + 1) % CYCLE];
        other[i][2] = (uintptr_t)other[(i + 1) % CYCLE] + 8;
    }
    uintptr_t *root = fake_carve(8);
    root[0] = (uintptr_t)blocks[CYCLE / 2];
    struct hs_mu_heap_walker w;
    build(&w);
    hs_mu_heap_walker_add_root(&w, (uintptr_t)root, (uintptr_t)root + 8);
    hs_mu_heap_walker_mark(&w);
    CHECK_EQ(w.num_marked, CYCLE);
    size_t ok = 0;
    for (size_t i = 0; i < CYCLE; i++)
        ok += marked(&w, blocks[i]) && !marked(&w, other[i]);
    CHECK_EQ(ok, CYCLE);
    hs_mu_heap_walker_destroy(&w);

    check_context("a 300000-block chain (no recursion)");
    fake_reset();
    enum { CHAIN = 300000 };
    uintptr_t *prev = NULL, *first = NULL;
    for (size_t i = 0; i < CHAIN; i++) {
        uintptr_t *blk = fake_block(16);
        if (prev)
            prev[1] = (uintptr_t)blk;
        else
            first = blk;
        prev = blk;
    }
    build(&w);
    hs_mu_heap_walker_add_root_value(&w, (uintptr_t)first);
    hs_mu_heap_walker_mark(&w);
    CHECK_EQ(w.num_marked, CHAIN);
    hs_mu_heap_walker_destroy(&w);

    check_context("a late fan-out: one array holds everything, scanned in address order");
    fake_reset();
    enum { FAN = 20000 };
    uintptr_t *array = fake_block(FAN * sizeof(uintptr_t));
    uintptr_t *head = fake_block(16), *tail = NULL;
    for (size_t i = 0; i < FAN; i++) {
        uintptr_t *blk = fake_block(48);
        array[i] = (uintptr_t)blk;
        if (i % 2 == 0) { /* every other one heads a chain of two more */
            blk[0] = (uintptr_t)fake_block(16);
            ((uintptr_t *)blk[0])[1] = (uintptr_t)(tail = fake_block(16));
        }
    }
    head[1] = (uintptr_t)array; /* root -> head -> array: a narrow frontier at first */
    uintptr_t *unreached = fake_block(16);
    build(&w);
    hs_mu_heap_walker_add_root_value(&w, (uintptr_t)head);
    hs_mu_heap_walker_mark(&w);
    CHECK_EQ(w.num_marked, 2 + FAN + FAN);
    CHECK(marked(&w, tail) && !marked(&w, unreached));
    CHECK(w.num_pass_scans >= FAN); /* not one block at a time from the stack */
    hs_mu_heap_walker_destroy(&w);

    check_context("fan-outs in turn, each wider than the stack and leading to the next");
    fake_reset();
    enum { ARRAYS = 6, WIDE = 3000 };
    uintptr_t *arrays[ARRAYS], *last_of[ARRAYS];
    for (size_t a = 0; a < ARRAYS; a++)
        arrays[a] = fake_block((WIDE + 1) * sizeof(uintptr_t));
    for (size_t a = 0; a < ARRAYS; a++) {
        for (size_t i = 0; i < WIDE; i++) {
            uintptr_t *blk = fake_block(32);
            arrays[a][i] = (uintptr_t)blk;
            if (i == WIDE - 1) /* the array's last block leads to the next array */
                blk[1] = a + 1 < ARRAYS ? (uintptr_t)arrays[a + 1] : 0;
            last_of[a] = blk;
        }
    }
    unreached = fake_block(16);
    build(&w);
    hs_mu_heap_walker_add_root_value(&w, (uintptr_t)arrays[0]);
    hs_mu_heap_walker_mark(&w);
    CHECK(w.cap_work < WIDE); /* so every array overflowed the stack */
    CHECK_EQ(w.num_marked, ARRAYS * (WIDE + 1));
    CHECK(marked(&w, last_of[ARRAYS - 1]) && !marked(&w, unreached));
    CHECK(w.num_work == 0 && w.num_pending == 0);
    hs_mu_heap_walker_destroy(&w);
}

static void test_chunk_filter(void)
{
    check_context("glibc chunk-header pointers in malloc-state roots");
    fake_reset();
    uintptr_t *state = fake_carve(64), *plain = fake_carve(16);
    uint8_t *b100 = fake_block(100), *b104 = fake_block(104), *b112 = fake_block(112);
    uint8_t *c100 = fake_block(100), *d8 = fake_block(8);
    state[0] = (uintptr_t)b100 + 96; /* next chunk's header: not a reference */
    state[1] = (uintptr_t)b104 + 96; /* same */
    state[2] = (uintptr_t)b112 + 96; /* 16 bytes before the end: a reference */
    state[3] = (uintptr_t)c100 + 88; /* not 16-byte aligned: a reference */
    state[4] = (uintptr_t)d8;        /* the first byte: always a reference */
    plain[0] = (uintptr_t)b104 + 96; /* outside malloc state: a reference */
    struct hs_mu_heap_walker w;
    build(&w);
    CHECK(hs_mu_heap_walker_add_root_flags(&w, (uintptr_t)state, (uintptr_t)state + 64,
                                           HS_MU_ROOT_MALLOC_STATE));
    hs_mu_heap_walker_mark(&w);
    CHECK(!marked(&w, b100));
    CHECK(!marked(&w, b104));
    CHECK(marked(&w, b112));
    CHECK(marked(&w, c100));
    CHECK(marked(&w, d8));
    hs_mu_heap_walker_destroy(&w);
    build(&w);
    hs_mu_heap_walker_add_root_flags(&w, (uintptr_t)state, (uintptr_t)state + 64,
                                     HS_MU_ROOT_MALLOC_STATE);
    hs_mu_heap_walker_add_root(&w, (uintptr_t)plain, (uintptr_t)plain + 16);
    hs_mu_heap_walker_mark(&w);
    CHECK(!marked(&w, b100));
    CHECK(marked(&w, b104));
    hs_mu_heap_walker_destroy(&w);
}

/* ---- Fault guard --------------------------------------------------------------------- */

static void test_prot_none(void)
{
    check_context("a PROT_NONE block referenced from a root");
    fake_reset();
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *pages = mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED);
    uintptr_t *inside = fake_block(32); /* referenced only from the protected block */
    ((uintptr_t *)(pages + ps))[0] = (uintptr_t)inside;
    fake_add(pages + ps, ps); /* the protected block */
    uintptr_t *after = fake_block(32);
    ((uintptr_t *)(pages + 2 * ps))[0] = (uintptr_t)after; /* in an unreadable root page */
    CHECK_EQ(mprotect(pages + ps, 2 * ps, PROT_NONE), 0);
    uintptr_t *root = fake_carve(8);
    root[0] = (uintptr_t)pages + ps + 100;

    struct hs_mu_heap_walker w;
    build(&w);
    hs_mu_heap_walker_add_root(&w, (uintptr_t)root, (uintptr_t)root + 8);
    hs_mu_heap_walker_add_root(&w, (uintptr_t)pages + 2 * ps, (uintptr_t)pages + 3 * ps);
    g_nlog = 0;
    hs_log_set_sink(sink, NULL);
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    CHECK_EQ(hs_mu_fault_guard_install(), EBUSY);
    hs_mu_heap_walker_mark(&w);
    size_t skipped = hs_mu_fault_guard_skipped_pages();
    hs_mu_fault_guard_remove();
    hs_log_set_sink(NULL, NULL);
    CHECK(marked(&w, pages + ps));
    CHECK(!marked(&w, inside)); /* its page read as zeros */
    CHECK(!marked(&w, after));
    CHECK_EQ(skipped, 2);
    CHECK_EQ(g_nlog, 1); /* logged once */
    CHECK(strstr(g_log[0], "skipped unreadable page at 0x") != NULL);
    /* The pages are now readable zeros (in the sweeper: its private copy). */
    CHECK_EQ(((volatile uintptr_t *)(pages + ps))[0], 0);
    hs_mu_heap_walker_destroy(&w);

    check_context("guarded copy of an unreadable range");
    uint8_t *q = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(q, 0x41, 2 * ps);
    mprotect(q + ps, ps, PROT_NONE);
    uint8_t buf[64];
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    hs_mu_read_guarded(buf, (uintptr_t)q + ps - 29, sizeof(buf)); /* odd start, crosses */
    CHECK_EQ(hs_mu_fault_guard_skipped_pages(), 1);
    hs_mu_fault_guard_remove();
    size_t ok = 0;
    for (size_t i = 0; i < sizeof(buf); i++)
        ok += buf[i] == (i < 29 ? 0x41 : 0);
    CHECK_EQ(ok, sizeof(buf));
    munmap(q, 2 * ps);
    munmap(pages, 3 * ps);
}

static void test_fault_outside_guard(void)
{
    check_context("a fault outside the guarded range still kills");
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p = mmap(NULL, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        hs_mu_fault_guard_install();
        hs_mu_fault_guard_enter((uintptr_t)p + 4 * ps, (uintptr_t)p + 5 * ps);
        (void)*(volatile uint8_t *)p;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

    check_context("the previous handler gets faults that are not ours");
    pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = _exit; /* exits with the signal number */
        sigaction(SIGSEGV, &sa, NULL);
        hs_mu_fault_guard_install();
        (void)*(volatile uint8_t *)p;
        _exit(0);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == SIGSEGV);
    munmap(p, ps);
}

int main(void)
{
    test_lookup_random();
    test_listed_source();
    test_listed_in_regions();
    test_lookup_layouts();
    test_lookup_overlaps();
    test_lookup_edges();
    test_mark_basic();
    test_mark_cycles_and_chains();
    test_chunk_filter();
    test_prot_none();
    test_fault_outside_guard();
    return check_report();
}
