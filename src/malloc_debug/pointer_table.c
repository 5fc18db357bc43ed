/* pointer_table.c: live bitmaps per address region and records in the blocks (see
 * pointer_table.h; the layout and the fast add and remove are in pointer_table_fast.h).
 *
 * Lock order: the creation lock, then region locks (lock_all); an add that creates a region
 * releases the creation lock before taking the region's.
 */
#include "pointer_table.h"

#include "arena.h"
#include "debug_state.h"
#include "guarded.h"
#include "hs_assert.h"
#include "pointer_table_fast.h"
#include "spinlock.h"

#include <string.h>

/* The layout's names, short (pointer_table_fast.h). */
#define REGION_SHIFT HS_MD_PT_REGION_SHIFT
#define ADDRESS_BITS HS_MD_PT_ADDRESS_BITS
#define DIR_ENTRIES HS_MD_PT_DIR_ENTRIES
#define GRANULE_SHIFT HS_MD_PT_GRANULE_SHIFT
#define REGION_BITS HS_MD_PT_REGION_BITS
#define REGION_WORDS HS_MD_PT_REGION_WORDS
#define SUMMARY_WORDS HS_MD_PT_SUMMARY_WORDS

struct hs_md_pt_region **hs_md_pt_dir;    /* atomic pointer, set once */
static struct hs_md_pt_region *g_regions; /* list head; atomic */
static hs_spinlock g_create_lock;         /* creation of the directory and of regions */

/* Where p's record is: in its guarded record for a guarded block, else in front of it. */
static inline struct hs_md_pt_record *record_of(uintptr_t p)
{
    if (hs_md.guarded) {
        struct hs_md_pt_record *g = hs_md_guarded_track_slot(p);
        if (g)
            return g;
    }
    return hs_md_pt_record_in_front(p);
}

/* The region of p, created if needed; NULL when memory ran out. */
static __attribute__((noinline)) struct hs_md_pt_region *region_create(uintptr_t p)
{
    if (p >> ADDRESS_BITS)
        return NULL; /* not a user-space address: never one of glibc's blocks */
    hs_spin_lock(&g_create_lock);
    struct hs_md_pt_region **dir = hs_md_pt_dir;
    if (!dir) {
        /* A fresh mapping: zero, and committed only where entries are written. */
        dir = hs_arena_alloc(&hs_md_arena, DIR_ENTRIES * sizeof(*dir));
        if (!dir) {
            hs_spin_unlock(&g_create_lock);
            return NULL;
        }
        __atomic_store_n(&hs_md_pt_dir, dir, __ATOMIC_RELEASE);
    }
    struct hs_md_pt_region *r = dir[p >> REGION_SHIFT];
    if (!r) {
        r = hs_arena_calloc(&hs_md_arena, sizeof(*r));
        uint64_t *bits = r ? hs_arena_alloc(&hs_md_arena, REGION_WORDS * sizeof(uint64_t)) : NULL;
        if (!bits) {
            if (r)
                hs_arena_free(&hs_md_arena, r, sizeof(*r));
            hs_spin_unlock(&g_create_lock);
            return NULL;
        }
        hs_assert(((uintptr_t)bits & 4095) == 0); /* its own mapping: zero-filled */
        r->bits = bits;
        r->base = p & ~(((uintptr_t)1 << REGION_SHIFT) - 1);
        r->next = g_regions;
        __atomic_store_n(&g_regions, r, __ATOMIC_RELEASE);
        __atomic_store_n(&dir[p >> REGION_SHIFT], r, __ATOMIC_RELEASE);
    }
    hs_spin_unlock(&g_create_lock);
    return r;
}

/* The general add and remove (pointer_table_fast.h has the fast ones, which hand anything
 * but the common case here: the fast paths then make no call, so they save no registers). */

__attribute__((noinline)) bool hs_md_pt_add_general(uintptr_t p, const struct hs_md_ptr_info *info)
{
    struct hs_md_pt_region *r = hs_md_pt_region_of(p);
    if (!r && !(r = region_create(p)))
        return false;
    hs_md_pt_record_write(record_of(p), p, info);
    hs_spin_lock(&r->lock);
    /* Already set: glibc handed out a live pointer twice, which cannot happen unless the heap
     * is corrupt; the new record stands (the old one's backtrace reference is lost). */
    struct hs_md_pt_bit b = hs_md_pt_bit_of(p);
    hs_md_pt_write_first(&r->bits[b.word]);
    hs_md_pt_bit_set(r, b);
    hs_spin_unlock(&r->lock);
    return true;
}

bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info)
{
    return hs_md_ptr_add_inline(ptr, info);
}

bool hs_md_ptr_restore(const void *ptr, const struct hs_md_ptr_info *info)
{
    /* The region exists (the pointer was in it): nothing to allocate. */
    hs_assert(hs_md_pt_region_of((uintptr_t)ptr) != NULL);
    return hs_md_ptr_add(ptr, info);
}

__attribute__((noinline)) bool hs_md_pt_remove_general(struct hs_md_pt_region *r, uintptr_t p,
                                                       struct hs_md_ptr_info *out)
{
    const struct hs_md_pt_record *rec = record_of(p);
    hs_spin_lock(&r->lock);
    bool live = hs_md_pt_take_locked(r, rec, p, out);
    hs_spin_unlock(&r->lock);
    return live;
}

bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out)
{
    return hs_md_ptr_remove_inline(ptr, out);
}

static bool find(const void *ptr, struct hs_md_ptr_info *out, bool ref)
{
    uintptr_t p = (uintptr_t)ptr;
    struct hs_md_pt_region *r = (p & 15) ? NULL : hs_md_pt_region_of(p);
    if (!r)
        return false;
    const struct hs_md_pt_record *rec = record_of(p);
    struct hs_md_pt_bit b = hs_md_pt_bit_of(p);
    hs_spin_lock(&r->lock);
    bool live = (r->bits[b.word] & b.mask) != 0;
    if (live && out) {
        hs_md_pt_record_read(rec, p, out);
        if (ref)
            hs_md_bt_ref(out->bt); /* lock order: region, then backtrace table */
    }
    hs_spin_unlock(&r->lock);
    return live;
}

bool hs_md_ptr_find(const void *ptr, struct hs_md_ptr_info *out)
{
    return find(ptr, out, false);
}

bool hs_md_ptr_find_ref(const void *ptr, struct hs_md_ptr_info *out)
{
    return find(ptr, out, true);
}

size_t hs_md_ptr_count(void)
{
    size_t n = 0;
    for (struct hs_md_pt_region *r = __atomic_load_n(&g_regions, __ATOMIC_ACQUIRE); r; r = r->next)
        n += __atomic_load_n(&r->count, __ATOMIC_RELAXED);
    return n;
}

size_t hs_md_ptr_peak(void)
{
    size_t n = 0;
    for (struct hs_md_pt_region *r = __atomic_load_n(&g_regions, __ATOMIC_ACQUIRE); r; r = r->next)
        n += __atomic_load_n(&r->peak, __ATOMIC_RELAXED);
    return n;
}

void hs_md_ptr_lock_all(void)
{
    hs_spin_lock(&g_create_lock); /* no region appears meanwhile */
    for (struct hs_md_pt_region *r = g_regions; r; r = r->next)
        hs_spin_lock(&r->lock);
}

void hs_md_ptr_unlock_all(void)
{
    for (struct hs_md_pt_region *r = g_regions; r; r = r->next)
        hs_spin_unlock(&r->lock);
    hs_spin_unlock(&g_create_lock);
}

/* Above this many regions, listing visits them newest first instead of in address order
 * (ordering costs a pass over the region list per region visited: at most 1024^2 steps, about
 * a millisecond). 1024 regions span 64 GiB. */
#define ORDERED_REGIONS_MAX 1024

/* Whether listing visits the regions in address order (lock held: no region appears). */
static bool regions_ordered(void)
{
    size_t n = 0;
    for (const struct hs_md_pt_region *r = g_regions; r && n <= ORDERED_REGIONS_MAX; r = r->next)
        n++;
    return n <= ORDERED_REGIONS_MAX;
}

/* Whether r covers any address of [lo, hi). */
static inline bool region_meets(const struct hs_md_pt_region *r, uintptr_t lo, uintptr_t hi)
{
    return r->base < hi && r->base + ((uintptr_t)1 << REGION_SHIFT) > lo;
}

/* The region to visit after prev (NULL: the first) among those holding addresses in
 * [lo, hi), in address order when ordered. In address order, a list of the whole table is
 * sorted: the unreachable-memory check then has no runs to put in order (run_order.h:
 * reversing 10^7 entries, listed newest region first, took 30 ms). A pass over the region list
 * per region visited: malloc_iterate over one mapping visits one or two. */
static const struct hs_md_pt_region *next_region(const struct hs_md_pt_region *prev, bool ordered,
                                                 uintptr_t lo, uintptr_t hi)
{
    const struct hs_md_pt_region *r = prev ? prev->next : g_regions;
    if (!ordered) {
        while (r && !region_meets(r, lo, hi))
            r = r->next;
        return r;
    }
    const struct hs_md_pt_region *best = NULL;
    for (r = g_regions; r; r = r->next)
        if (region_meets(r, lo, hi) && (!prev || r->base > prev->base) &&
            (!best || r->base < best->base))
            best = r;
    return best;
}

/* How far ahead of the word being visited for_each_live prefetches the records: 2 words are
 * 2 KiB of heap, some 18 blocks of 100 bytes, enough to cover a miss to memory. */
#define PREFETCH_WORDS 2

/* Prefetches the records (in front of the blocks: a guarded block's is elsewhere, and its
 * prefetch is merely wasted) of the live pointers of bitmap word w. Visiting reads each
 * record, a miss per block on a big heap that the hardware prefetcher does not cover across
 * the gaps between blocks (listing 10^7 blocks of 100 bytes: ~20 ns a block without it). */
static inline __attribute__((always_inline)) void prefetch_records(const struct hs_md_pt_region *r,
                                                                   size_t w)
{
    uintptr_t base = r->base - hs_md.track_offset + ((uintptr_t)w * 64 << GRANULE_SHIFT);
    for (uint64_t bw = r->bits[w]; bw; bw &= bw - 1)
        __builtin_prefetch(
            (const void *)(base + ((uintptr_t)__builtin_ctzll(bw) << GRANULE_SHIFT)));
}

/* Calls visit for every live pointer of r whose bit is in [first, end), in address order
 * (lock held). Inline with a constant visit, so that listing 10^7 blocks makes no call per
 * block; the whole region is first = 0, end = REGION_BITS (every mask all ones). */
static inline __attribute__((always_inline)) void
for_each_live(const struct hs_md_pt_region *r, size_t first, size_t end,
              void (*visit)(uintptr_t p, void *arg), void *arg)
{
    hs_assert(end <= REGION_BITS);
    if (first >= end)
        return;
    size_t w_first = first / 64, w_last = (end - 1) / 64;
    for (size_t s = w_first / 64; s <= w_last / 64; s++) {
        uint64_t sw = r->summary[s];
        if (s == w_first / 64)
            sw &= ~UINT64_C(0) << (w_first % 64);
        if (s == w_last / 64)
            sw &= ~UINT64_C(0) >> (63 - w_last % 64);
        for (; sw; sw &= sw - 1) {
            size_t w = s * 64 + (size_t)__builtin_ctzll(sw);
            if (w + PREFETCH_WORDS < REGION_WORDS)
                prefetch_records(r, w + PREFETCH_WORDS);
            uint64_t bw = r->bits[w];
            if (w == w_first)
                bw &= ~UINT64_C(0) << (first % 64);
            if (w == w_last)
                bw &= ~UINT64_C(0) >> (63 - (end - 1) % 64);
            for (; bw; bw &= bw - 1)
                visit(r->base + ((w * 64 + (size_t)__builtin_ctzll(bw)) << GRANULE_SHIFT), arg);
        }
    }
}

/* The bits of r for pointers in [lo, hi): *first and *end (empty when *first >= *end). */
static void bits_in_range(const struct hs_md_pt_region *r, uintptr_t lo, uintptr_t hi,
                          size_t *first, size_t *end)
{
    const uintptr_t region_end = r->base + ((uintptr_t)1 << REGION_SHIFT);
    *first = lo <= r->base ? 0
             : lo >= region_end
                 ? REGION_BITS
                 : (size_t)((lo - r->base + ((uintptr_t)1 << GRANULE_SHIFT) - 1) >> GRANULE_SHIFT);
    *end = hi >= region_end ? REGION_BITS
           : hi <= r->base
               ? 0
               : (size_t)((hi - r->base + ((uintptr_t)1 << GRANULE_SHIFT) - 1) >> GRANULE_SHIFT);
}

struct foreach_args {
    void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info, void *arg);
    void *arg;
};

static void foreach_visit(uintptr_t p, void *arg)
{
    const struct foreach_args *a = arg;
    struct hs_md_ptr_info info;
    hs_md_pt_record_read(record_of(p), p, &info);
    a->fn(p, &info, a->arg);
}

void hs_md_ptr_foreach_in_locked(uintptr_t lo, uintptr_t hi,
                                 void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                            void *arg),
                                 void *arg)
{
    struct foreach_args a = {fn, arg};
    bool ordered = regions_ordered();
    for (const struct hs_md_pt_region *r = next_region(NULL, ordered, lo, hi); r;
         r = next_region(r, ordered, lo, hi)) {
        size_t first, end;
        bits_in_range(r, lo, hi, &first, &end);
        for_each_live(r, first, end, foreach_visit, &a);
    }
}

void hs_md_ptr_foreach_locked(void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                         void *arg),
                              void *arg)
{
    hs_md_ptr_foreach_in_locked(0, UINTPTR_MAX, fn, arg);
}

struct list_args {
    uintptr_t (*out)[2];
    size_t cap, n;
};

static inline __attribute__((always_inline)) void list_visit(uintptr_t p, void *arg)
{
    struct list_args *a = arg;
    if (a->n < a->cap) {
        struct hs_md_ptr_info info;
        hs_md_pt_record_read(record_of(p), p, &info);
        a->out[a->n][0] = p;
        a->out[a->n][1] = info.size;
    }
    a->n++;
}

size_t hs_md_ptr_list_locked(uintptr_t (*out)[2], size_t cap)
{
    struct list_args a = {out, cap, 0};
    bool ordered = regions_ordered();
    for (const struct hs_md_pt_region *r = next_region(NULL, ordered, 0, UINTPTR_MAX); r;
         r = next_region(r, ordered, 0, UINTPTR_MAX))
        for_each_live(r, 0, REGION_BITS, list_visit, &a);
    return a.n;
}
