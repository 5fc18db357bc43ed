/* test_pointer_table.c: malloc debug's live-allocation table (src/malloc_debug/pointer_table.c)
 * on real memory, as the shim uses it: each block's record in the 16 bytes in front of it
 * (hs_md.track_offset), the live bits in per-region bitmaps. Checked: what goes in comes back
 * (size, backtrace, lead); any pointer may be asked about without anything being read at it
 * (misaligned, above user space, in no region, on a PROT_NONE page); a record the program
 * overwrote is reported as damaged and its block stays; region edges; listing order and cap;
 * size limits; random operations against a model over three regions; threads adding and
 * removing their own blocks and each other's (run under ThreadSanitizer by the sanitizer leg).
 */
#define _GNU_SOURCE
#include "check.h"

#include "debug_state.h"
#include "pointer_table.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define REGION ((uintptr_t)64 << 20)
#define REGIONS 4

static uintptr_t g_base; /* REGIONS regions of readable, writable memory, region-aligned */

static void map_backing(void)
{
    size_t len = (REGIONS + 1) * REGION;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        abort();
    g_base = ((uintptr_t)m + REGION - 1) & ~(REGION - 1);
}

static bool find_size(uintptr_t p, size_t *size)
{
    struct hs_md_ptr_info info;
    if (!hs_md_ptr_find((void *)p, &info))
        return false;
    *size = info.size;
    return !info.damaged;
}

static void add_plain(uintptr_t p, size_t size)
{
    struct hs_md_ptr_info info = {.size = size};
    CHECK(hs_md_ptr_add((void *)p, &info));
}

static bool remove_plain(uintptr_t p, size_t *size)
{
    struct hs_md_ptr_info out;
    if (!hs_md_ptr_remove((void *)p, &out))
        return false;
    *size = out.size;
    return true;
}

static void test_round_trip(void)
{
    check_context("an entry comes back as it went in");
    uintptr_t p = g_base + 4096;
    struct hs_md_bt *bt = (struct hs_md_bt *)(uintptr_t)0x7f0000001230; /* never followed */
    struct hs_md_ptr_info in = {.size = 12345, .bt = bt, .lead_shift = 6};
    CHECK(hs_md_ptr_add((void *)p, &in));
    uint64_t record[2];
    memcpy(record, (void *)(p - 16), 16);
    CHECK(record[1] == (uint64_t)(uintptr_t)bt); /* the record is in front of the block */
    struct hs_md_ptr_info out;
    CHECK(hs_md_ptr_find((void *)p, &out));
    CHECK_EQ(out.size, 12345);
    CHECK(out.bt == bt && out.lead_shift == 6 && !out.damaged);
    CHECK_EQ(hs_md_ptr_count(), 1);
    CHECK(hs_md_ptr_remove((void *)p, &out));
    CHECK(out.size == 12345 && out.bt == bt && out.lead_shift == 6);
    CHECK(!hs_md_ptr_find((void *)p, NULL));
    CHECK(!hs_md_ptr_remove((void *)p, &out));
    CHECK_EQ(hs_md_ptr_count(), 0);
}

static void test_bad_pointers(void)
{
    check_context("pointers the table does not know are never read");
    uintptr_t live = g_base + REGION + 64;
    add_plain(live, 10);
    struct hs_md_ptr_info out;
    /* A page in the same region with no access: asking about it must not touch it. */
    uintptr_t locked = g_base + REGION + 8 * 4096;
    CHECK(mprotect((void *)locked, 4096, PROT_NONE) == 0);
    CHECK(!hs_md_ptr_find((void *)(locked + 16), &out));
    CHECK(!hs_md_ptr_remove((void *)(locked + 16), &out));
    CHECK(!hs_md_ptr_find((void *)(locked + 4096 - 16), NULL));
    CHECK(mprotect((void *)locked, 4096, PROT_READ | PROT_WRITE) == 0);
    /* Misaligned (inside the live block), above user space, in a region never used, NULL. */
    CHECK(!hs_md_ptr_remove((void *)(live + 8), &out));
    CHECK(!hs_md_ptr_find((void *)(live + 1), &out));
    CHECK(!hs_md_ptr_remove((void *)((uintptr_t)1 << 52), &out));
    CHECK(!hs_md_ptr_find((void *)~(uintptr_t)15, &out));
    CHECK(!hs_md_ptr_remove((void *)(g_base + 3 * REGION + 32), &out));
    CHECK(!hs_md_ptr_find(NULL, &out));
    CHECK_EQ(hs_md_ptr_count(), 1);
    size_t size = 0;
    CHECK(remove_plain(live, &size) && size == 10);
    /* Above user space an add fails (glibc never hands out such a pointer). */
    struct hs_md_ptr_info in = {.size = 1};
    CHECK(!hs_md_ptr_add((void *)((uintptr_t)1 << 47), &in));
    CHECK_EQ(hs_md_ptr_count(), 0);
}

static void count_one(uintptr_t p, const struct hs_md_ptr_info *info, void *arg)
{
    (void)p;
    size_t *n = arg;
    n[0]++;
    if (info->damaged)
        n[1]++;
}

static void test_damaged_record(void)
{
    check_context("a record the program overwrote");
    uintptr_t p = g_base + 2 * REGION + 256;
    struct hs_md_ptr_info in = {.size = 48, .bt = (struct hs_md_bt *)(uintptr_t)0x1000};
    CHECK(hs_md_ptr_add((void *)p, &in));
    memset((void *)(p - 16), 0x41, 16); /* an underflow */
    struct hs_md_ptr_info out;
    CHECK(hs_md_ptr_find((void *)p, &out));
    CHECK(out.damaged && out.size == 0 && out.bt == NULL && out.tag == 0x41414141);
    /* remove says live and damaged, and leaves the block in the table. */
    CHECK(hs_md_ptr_remove((void *)p, &out));
    CHECK(out.damaged && out.bt == NULL);
    CHECK(hs_md_ptr_find((void *)p, NULL));
    CHECK_EQ(hs_md_ptr_count(), 1);
    size_t n[2] = {0, 0};
    hs_md_ptr_lock_all();
    hs_md_ptr_foreach_locked(count_one, n);
    hs_md_ptr_unlock_all();
    CHECK(n[0] == 1 && n[1] == 1);
    /* A single flipped bit is seen too (here one of the check's own). */
    CHECK(hs_md_ptr_restore((void *)p, &in));
    CHECK_EQ(hs_md_ptr_count(), 1);
    ((uint8_t *)(p - 16))[7] ^= 4;
    CHECK(hs_md_ptr_find((void *)p, &out) && out.damaged);
    /* Restored, it is whole again and goes. */
    CHECK(hs_md_ptr_restore((void *)p, &in));
    CHECK(hs_md_ptr_remove((void *)p, &out) && !out.damaged && out.size == 48);
    CHECK_EQ(hs_md_ptr_count(), 0);
}

static void collect(uintptr_t p, const struct hs_md_ptr_info *info, void *arg)
{
    uintptr_t *seen = arg;
    seen[++seen[0]] = p;
    seen[64 + seen[0]] = info->size;
}

static void test_region_edges_and_listing(void)
{
    check_context("region edges, listing order and cap, size limits");
    /* First and last granules of a region, and the first of the next one. */
    uintptr_t ptrs[] = {g_base + 16, g_base + REGION - 16, g_base + REGION, g_base + REGION + 4096 * 64};
    for (size_t i = 0; i < 4; i++)
        add_plain(ptrs[i], 100 + i);
    uintptr_t seen[130] = {0};
    uintptr_t list[4][2];
    hs_md_ptr_lock_all();
    hs_md_ptr_foreach_locked(collect, seen);
    size_t total = hs_md_ptr_list_locked(list, 3);
    hs_md_ptr_unlock_all();
    CHECK_EQ(seen[0], 4);
    CHECK_EQ(total, 4);
    /* Every pointer once, ascending (region 1 was created after region 0, and the regions are
     * kept newest first: listing orders them), and the list in the same order. */
    size_t found = 0;
    for (size_t i = 1; i <= seen[0]; i++) {
        for (size_t j = 0; j < 4; j++)
            if (seen[i] == ptrs[j]) {
                found++;
                CHECK_EQ(seen[64 + i], 100 + j);
            }
        if (i > 1)
            CHECK(seen[i] > seen[i - 1]);
        if (i <= 3)
            CHECK(list[i - 1][0] == seen[i] && list[i - 1][1] == seen[64 + i]);
    }
    CHECK_EQ(found, 4);
    for (size_t i = 0; i < 4; i++) {
        size_t size = 0;
        CHECK(remove_plain(ptrs[i], &size) && size == 100 + i);
    }
    /* The largest size a record holds, and one more (the add fails, nothing is added). */
    add_plain(g_base + 512, HS_MD_PTR_MAX_SIZE);
    size_t size = 0;
    CHECK(find_size(g_base + 512, &size) && size == HS_MD_PTR_MAX_SIZE);
    CHECK(remove_plain(g_base + 512, &size));
    struct hs_md_ptr_info big = {.size = HS_MD_PTR_MAX_SIZE + 1};
    CHECK(!hs_md_ptr_add((void *)(g_base + 512), &big));
    CHECK(!hs_md_ptr_find((void *)(g_base + 512), NULL));
    CHECK_EQ(hs_md_ptr_count(), 0);
    CHECK(hs_md_ptr_peak() >= 4);
}

struct in_range {
    uintptr_t lo, hi;
    size_t n, outside;
};

static void count_in_range(uintptr_t p, const struct hs_md_ptr_info *info, void *arg)
{
    (void)info;
    struct in_range *r = arg;
    r->n++;
    r->outside += p < r->lo || p >= r->hi;
}

static void test_listing_a_range(void)
{
    check_context("listing the pointers of an address range only (malloc_iterate)");
    /* Blocks at both ends of a region, around a bitmap word's and a summary word's edges
     * (a bitmap word covers 1 KiB, a summary word 64 KiB), and in the next region. */
    const uintptr_t ptrs[] = {g_base + 16,          g_base + 1008,        g_base + 1024,
                              g_base + 1040,        g_base + 65520,       g_base + 65536,
                              g_base + REGION - 16, g_base + REGION,      g_base + REGION + 32,
                              g_base + 2 * REGION + 4096};
    const size_t n = sizeof(ptrs) / sizeof(ptrs[0]);
    for (size_t i = 0; i < n; i++)
        add_plain(ptrs[i], 64);
    /* Ranges with ends on, just before and just after blocks, inside granules, across
     * regions, empty and reversed. */
    const uintptr_t ends[] = {0,
                              g_base,
                              g_base + 15,
                              g_base + 16,
                              g_base + 17,
                              g_base + 1008,
                              g_base + 1024,
                              g_base + 1025,
                              g_base + 65536,
                              g_base + 65537,
                              g_base + REGION - 16,
                              g_base + REGION,
                              g_base + REGION + 33,
                              g_base + 3 * REGION,
                              UINTPTR_MAX};
    const size_t n_ends = sizeof(ends) / sizeof(ends[0]);
    size_t wrong = 0;
    hs_md_ptr_lock_all();
    for (size_t i = 0; i < n_ends; i++) {
        for (size_t j = 0; j < n_ends; j++) {
            struct in_range r = {ends[i], ends[j], 0, 0};
            hs_md_ptr_foreach_in_locked(r.lo, r.hi, count_in_range, &r);
            size_t expected = 0;
            for (size_t k = 0; k < n; k++)
                expected += ptrs[k] >= r.lo && ptrs[k] < r.hi;
            wrong += r.n != expected || r.outside != 0;
        }
    }
    hs_md_ptr_unlock_all();
    CHECK_EQ(wrong, 0);
    for (size_t i = 0; i < n; i++)
        CHECK(remove_plain(ptrs[i], &(size_t){0}));
    CHECK_EQ(hs_md_ptr_count(), 0);
}

/* Random adds, removes and finds over three regions, against an array of what should be
 * there; neighbouring blocks 48 bytes apart share bitmap words. */
static void test_against_model(void)
{
    check_context("random operations against a model");
    enum { KEYS = 3000, OPS = 200000 };
    uintptr_t *keys = calloc(KEYS, sizeof(*keys));
    size_t *sizes = calloc(KEYS, sizeof(*sizes)); /* 0: absent */
    for (size_t i = 0; i < KEYS; i++)
        keys[i] = g_base + (i % 3) * REGION + 32 + (i / 3) * 48;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    size_t live = 0, bad = 0;
    for (size_t op = 0; op < OPS; op++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t i = (size_t)(rng >> 8) % KEYS;
        size_t got = 0;
        switch (rng % 3) {
        case 0:
            if (sizes[i] == 0) {
                add_plain(keys[i], 1 + op);
                sizes[i] = 1 + op;
                live++;
            }
            break;
        case 1:
            if (remove_plain(keys[i], &got) != (sizes[i] != 0) || got != sizes[i])
                bad++;
            if (sizes[i])
                live--;
            sizes[i] = 0;
            break;
        default:
            if (sizes[i] ? !find_size(keys[i], &got) || got != sizes[i]
                         : hs_md_ptr_find((void *)keys[i], NULL))
                bad++;
            break;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_md_ptr_count(), live);
    uintptr_t (*list)[2] = calloc(KEYS, sizeof(*list));
    hs_md_ptr_lock_all();
    CHECK_EQ(hs_md_ptr_list_locked(list, KEYS), live);
    hs_md_ptr_unlock_all();
    for (size_t k = 0; k < live; k++) {
        size_t got = 0;
        CHECK(find_size(list[k][0], &got) && got == list[k][1]);
    }
    for (size_t i = 0; i < KEYS; i++) {
        size_t got = 0;
        if (sizes[i])
            CHECK(remove_plain(keys[i], &got) && got == sizes[i]);
    }
    CHECK_EQ(hs_md_ptr_count(), 0);
    free(list);
    free(keys);
    free(sizes);
}

/* Threads adding and removing their own blocks, in a region of their own and in a shared
 * one, and removing blocks the main thread added. */
enum { THREADS = 4, PER_THREAD = 20000 };

static void *worker(void *arg)
{
    uintptr_t t = (uintptr_t)arg;
    uintptr_t own = g_base + (t % 2) * REGION + (t / 2) * (REGION / 2);
    uintptr_t shared = g_base + 3 * REGION + t * 16; /* interleaved with the other threads' */
    size_t bad = 0;
    for (int round = 0; round < 3; round++) {
        for (uintptr_t i = 0; i < PER_THREAD; i++) {
            struct hs_md_ptr_info info = {.size = i + 1};
            if (!hs_md_ptr_add((void *)(own + i * 16 + 16), &info) ||
                !hs_md_ptr_add((void *)(shared + i * 16 * THREADS), &info))
                bad++;
        }
        for (uintptr_t i = 0; i < PER_THREAD; i++) {
            struct hs_md_ptr_info out;
            if (!hs_md_ptr_remove((void *)(own + i * 16 + 16), &out) || out.size != i + 1)
                bad++;
            if (!hs_md_ptr_find((void *)(shared + i * 16 * THREADS), &out) || out.size != i + 1)
                bad++;
            if (!hs_md_ptr_remove((void *)(shared + i * 16 * THREADS), &out))
                bad++;
        }
    }
    return (void *)bad;
}

static void test_threads(void)
{
    check_context("threads adding and removing at once");
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    size_t bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (size_t)r;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_md_ptr_count(), 0);
    CHECK(hs_md_ptr_peak() >= PER_THREAD);
}

/* An add's first access to a page of a region's bitmap is a write: one page fault per page.
 * A load first would map the zero page, and the store after it would fault again (and, in a
 * program running on several CPUs, flush their TLBs: an IPI each). 128 blocks 512 KiB apart
 * in a region never used: each has its own bitmap page (and its record its own page of the
 * backing memory), so about 256 faults, 384 with a load first. Not under the sanitizers,
 * whose shadow pages fault too, and only on x86-64, where the write comes first. */
static void test_bitmap_pages_fault_once(void)
{
    check_context("one fault per bitmap page");
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    enum { N = 128 };
    uintptr_t base = g_base + REGIONS * REGION - REGION; /* the last region, fresh */
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    for (size_t i = 0; i < N; i++)
        add_plain(base + i * (512 << 10) + 64, 8);
    getrusage(RUSAGE_THREAD, &after);
    long faults = after.ru_minflt - before.ru_minflt;
    CHECK(faults <= 2 * N + 32);
    if (faults > 2 * N + 32)
        fprintf(stderr, "    %ld page faults for %d adds\n", faults, (int)N);
    for (size_t i = 0; i < N; i++) {
        size_t size;
        CHECK(remove_plain(base + i * (512 << 10) + 64, &size));
    }
#endif
    check_context(NULL);
}

int main(void)
{
    map_backing();
    hs_md.track_offset = HS_MD_TRACK_RECORD;
    test_bitmap_pages_fault_once();
    test_round_trip();
    test_bad_pointers();
    test_damaged_record();
    test_region_edges_and_listing();
    test_listing_a_range();
    test_against_model();
    test_threads();
    return check_report();
}
