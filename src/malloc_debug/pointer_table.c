/* pointer_table.c: live bitmaps per address region and records in the blocks (see
 * pointer_table.h).
 *
 * The directory has an entry per 64 MiB region of the 47-bit user address space (2^21
 * entries, 16 MiB of address space mapped untouched: only the pages of used entries are
 * ever committed). A region has a bit per 16 bytes (2^22 bits, 512 KiB, committed page by
 * page as blocks appear), a summary bit per bitmap word (so that listing skips empty words
 * without reading them), its count and its lock. Regions are created once and never freed;
 * the directory entry is published with release order, so a lookup is two loads without a
 * lock. Lock order: the creation lock, then region locks (lock_all); an add that creates a
 * region releases the creation lock before taking the region's.
 *
 * Cost of an add: two stores of the record, two loads, a lock round trip and a bit set;
 * a remove: the same with a bit test and clear, and the record's check.
 */
#include "pointer_table.h"

#include "arena.h"
#include "debug_state.h"
#include "guarded.h"
#include "hs_assert.h"
#include "spinlock.h"

#include <string.h>

#define REGION_SHIFT 26 /* 64 MiB: glibc's HEAP_MAX_SIZE on 64-bit */
#define ADDRESS_BITS 47 /* x86-64 and arm64 user space */
#define DIR_ENTRIES ((size_t)1 << (ADDRESS_BITS - REGION_SHIFT))
#define GRANULE_SHIFT 4 /* malloc's minimum alignment: 16 bytes */
#define REGION_BITS ((size_t)1 << (REGION_SHIFT - GRANULE_SHIFT))
#define REGION_WORDS (REGION_BITS / 64)
#define SUMMARY_WORDS (REGION_WORDS / 64)

_Static_assert(REGION_WORDS % 64 == 0, "a summary word covers 64 bitmap words");
_Static_assert(HS_MD_PTR_MAX_SIZE >> 42 == 0, "the size takes the low 42 bits of a record");

struct region {
    hs_spinlock lock;
    size_t count; /* live bits; guarded by lock, read relaxed for statistics */
    size_t peak;  /* highest count so far */
    uintptr_t base;
    struct region *next;             /* every region, newest first (set before publication) */
    uint64_t *bits;                  /* REGION_WORDS words; guarded by lock */
    uint64_t summary[SUMMARY_WORDS]; /* bit w: bits[w] != 0; guarded by lock */
} __attribute__((aligned(64)));

static struct region **g_dir;     /* DIR_ENTRIES entries; atomic pointer, set once */
static struct region *g_regions;  /* list head; atomic */
static hs_spinlock g_create_lock; /* creation of the directory and of regions */

/* The record: word 0 holds the size (bits 0-41), the lead shift (42-47) and a check (48-63)
 * over both words and the pointer; word 1 the backtrace. */
struct record {
    uint64_t word;
    struct hs_md_bt *bt;
};

_Static_assert(sizeof(struct record) == HS_MD_TRACK_RECORD, "a record is 16 bytes");

/* Two multiplications: every bit of the pointer, the fields and the backtrace reaches the
 * top 16 bits, so damage to either word goes unseen about once in 65536. */
static inline uint64_t record_check(uintptr_t p, uint64_t fields, const struct hs_md_bt *bt)
{
    return ((((p ^ (uintptr_t)bt) * 0x9e3779b97f4a7c15ull) ^ fields) * 0xff51afd7ed558ccdull) >> 48;
}

/* Where the record of the block at p is without guarded memory: in front of it. */
static inline struct record *record_in_front(uintptr_t p)
{
    return (struct record *)(p - hs_md.track_offset);
}

/* Where p's record is: in its guarded record for a guarded block, else in front of it. */
static inline struct record *record_of(uintptr_t p)
{
    if (hs_md.guarded) {
        struct record *g = hs_md_guarded_track_slot(p);
        if (g)
            return g;
    }
    return record_in_front(p);
}

static inline void record_write(struct record *r, uintptr_t p, const struct hs_md_ptr_info *info)
{
    uint64_t fields = (uint64_t)info->size | (uint64_t)info->lead_shift << 42;
    r->word = fields | record_check(p, fields, info->bt) << 48;
    r->bt = info->bt;
}

static inline void record_read(const struct record *r, uintptr_t p, struct hs_md_ptr_info *out)
{
    uint64_t word = r->word;
    struct hs_md_bt *bt = r->bt;
    uint64_t fields = word & ((UINT64_C(1) << 48) - 1);
    /* A backtrace record is 16-aligned (arena blocks are): a misaligned one is damage the
     * check missed (1 in 65536), and is not followed either. */
    if (__builtin_expect(word >> 48 != record_check(p, fields, bt) || ((uintptr_t)bt & 15), 0)) {
        *out = (struct hs_md_ptr_info){0, NULL, 0, true, (uint32_t)(word >> 32)};
        return;
    }
    *out = (struct hs_md_ptr_info){fields & HS_MD_PTR_MAX_SIZE, bt, (unsigned)(fields >> 42), false,
                                   0};
}

/* The region of p, or NULL (none yet, or not a user-space address). Lock-free. */
static inline struct region *region_of(uintptr_t p)
{
    if (p >> ADDRESS_BITS)
        return NULL;
    struct region **dir = __atomic_load_n(&g_dir, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!dir, 0))
        return NULL;
    return __atomic_load_n(&dir[p >> REGION_SHIFT], __ATOMIC_ACQUIRE);
}

/* The region of p, created if needed; NULL when memory ran out. */
static __attribute__((noinline)) struct region *region_create(uintptr_t p)
{
    if (p >> ADDRESS_BITS)
        return NULL; /* not a user-space address: never one of glibc's blocks */
    hs_spin_lock(&g_create_lock);
    struct region **dir = g_dir;
    if (!dir) {
        /* A fresh mapping: zero, and committed only where entries are written. */
        dir = hs_arena_alloc(&hs_md_arena, DIR_ENTRIES * sizeof(*dir));
        if (!dir) {
            hs_spin_unlock(&g_create_lock);
            return NULL;
        }
        __atomic_store_n(&g_dir, dir, __ATOMIC_RELEASE);
    }
    struct region *r = dir[p >> REGION_SHIFT];
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

/* Where p's bit is in its region. */
struct bit {
    size_t word;
    uint64_t mask;
};

static inline struct bit bit_of(uintptr_t p)
{
    size_t i = (p >> GRANULE_SHIFT) & (REGION_BITS - 1);
    return (struct bit){i / 64, UINT64_C(1) << (i % 64)};
}

/* Makes the first access to w's page a write (lock held; before bit_set of an add, which
 * makes a word's first access in a fresh page): a load first would map the shared
 * zero page, and the store after it would fault again and flush the TLB of every CPU the
 * program runs on, an IPI per page (about 80 us on a VM; 728 of them in a 2-thread run
 * allocating 4,000,000 blocks under leak_track). x86 faults an "or" to memory as a write, and
 * or-ing 0 changes nothing. */
static inline __attribute__((always_inline)) void write_first(uint64_t *w)
{
#if defined(__x86_64__)
    __asm__ volatile("orq $0, %0" : "+m"(*w));
#else
    (void)w;
#endif
}

/* Sets p's bit (lock held); false when it was set already. */
static inline __attribute__((always_inline)) bool bit_set(struct region *r, struct bit b)
{
    uint64_t old = r->bits[b.word];
    if (old & b.mask)
        return false;
    r->bits[b.word] = old | b.mask;
    if (!old)
        r->summary[b.word / 64] |= UINT64_C(1) << (b.word % 64);
    if (++r->count > r->peak)
        r->peak = r->count;
    return true;
}

/* Clears p's bit (lock held); false when it was clear. */
static inline bool bit_clear(struct region *r, struct bit b)
{
    uint64_t old = r->bits[b.word];
    if (!(old & b.mask))
        return false;
    uint64_t now = old & ~b.mask;
    r->bits[b.word] = now;
    if (!now)
        r->summary[b.word / 64] &= ~(UINT64_C(1) << (b.word % 64));
    hs_assert(r->count > 0);
    r->count--;
    return true;
}

/* Each operation has a general version (a region to create, a lock to wait for, guarded
 * memory) and add and remove a fast one for the common case that hands anything else to the
 * general one: the fast paths then make no call, so they save no registers. */

static __attribute__((noinline)) bool add_general(uintptr_t p, const struct hs_md_ptr_info *info)
{
    struct region *r = region_of(p);
    if (!r && !(r = region_create(p)))
        return false;
    record_write(record_of(p), p, info);
    hs_spin_lock(&r->lock);
    /* Already set: glibc handed out a live pointer twice, which cannot happen unless the heap
     * is corrupt; the new record stands (the old one's backtrace reference is lost). */
    struct bit b = bit_of(p);
    write_first(&r->bits[b.word]);
    bit_set(r, b);
    hs_spin_unlock(&r->lock);
    return true;
}

bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info)
{
    uintptr_t p = (uintptr_t)ptr;
    hs_assert((p & 15) == 0 && info->lead_shift < 64);
    if (__builtin_expect(info->size > HS_MD_PTR_MAX_SIZE, 0))
        return false;
    struct region *r = region_of(p);
    if (__builtin_expect(!r || hs_md.guarded || !hs_spin_trylock_fast(&r->lock), 0))
        return add_general(p, info);
    record_write(record_in_front(p), p, info);
    struct bit b = bit_of(p); /* as in add_general */
    write_first(&r->bits[b.word]);
    bit_set(r, b);
    hs_spin_unlock(&r->lock);
    return true;
}

bool hs_md_ptr_restore(const void *ptr, const struct hs_md_ptr_info *info)
{
    /* The region exists (the pointer was in it): nothing to allocate. */
    hs_assert(region_of((uintptr_t)ptr) != NULL);
    return hs_md_ptr_add(ptr, info);
}

/* Clears r's bit for p and reads its record (r's lock held); a damaged record's bit stays. */
static inline __attribute__((always_inline)) bool
take_locked(struct region *r, const struct record *rec, uintptr_t p, struct hs_md_ptr_info *out)
{
    struct bit b = bit_of(p);
    if (!bit_clear(r, b))
        return false;
    record_read(rec, p, out);
    if (__builtin_expect(out->damaged, 0))
        bit_set(r, b); /* stays: see pointer_table.h */
    return true;
}

static __attribute__((noinline)) bool remove_general(struct region *r, uintptr_t p,
                                                     struct hs_md_ptr_info *out)
{
    const struct record *rec = record_of(p);
    hs_spin_lock(&r->lock);
    bool live = take_locked(r, rec, p, out);
    hs_spin_unlock(&r->lock);
    return live;
}

bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out)
{
    uintptr_t p = (uintptr_t)ptr;
    struct region *r = (p & 15) ? NULL : region_of(p);
    if (!r)
        return false;
    if (__builtin_expect(hs_md.guarded || !hs_spin_trylock_fast(&r->lock), 0))
        return remove_general(r, p, out);
    bool live = take_locked(r, record_in_front(p), p, out);
    hs_spin_unlock(&r->lock);
    return live;
}

static bool find(const void *ptr, struct hs_md_ptr_info *out, bool ref)
{
    uintptr_t p = (uintptr_t)ptr;
    struct region *r = (p & 15) ? NULL : region_of(p);
    if (!r)
        return false;
    const struct record *rec = record_of(p);
    struct bit b = bit_of(p);
    hs_spin_lock(&r->lock);
    bool live = (r->bits[b.word] & b.mask) != 0;
    if (live && out) {
        record_read(rec, p, out);
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
    for (struct region *r = __atomic_load_n(&g_regions, __ATOMIC_ACQUIRE); r; r = r->next)
        n += __atomic_load_n(&r->count, __ATOMIC_RELAXED);
    return n;
}

size_t hs_md_ptr_peak(void)
{
    size_t n = 0;
    for (struct region *r = __atomic_load_n(&g_regions, __ATOMIC_ACQUIRE); r; r = r->next)
        n += __atomic_load_n(&r->peak, __ATOMIC_RELAXED);
    return n;
}

void hs_md_ptr_lock_all(void)
{
    hs_spin_lock(&g_create_lock); /* no region appears meanwhile */
    for (struct region *r = g_regions; r; r = r->next)
        hs_spin_lock(&r->lock);
}

void hs_md_ptr_unlock_all(void)
{
    for (struct region *r = g_regions; r; r = r->next)
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
    for (const struct region *r = g_regions; r && n <= ORDERED_REGIONS_MAX; r = r->next)
        n++;
    return n <= ORDERED_REGIONS_MAX;
}

/* Whether r covers any address of [lo, hi). */
static inline bool region_meets(const struct region *r, uintptr_t lo, uintptr_t hi)
{
    return r->base < hi && r->base + ((uintptr_t)1 << REGION_SHIFT) > lo;
}

/* The region to visit after prev (NULL: the first) among those holding addresses in
 * [lo, hi), in address order when ordered. In address order, a list of the whole table is
 * sorted: the unreachable-memory check then has no runs to put in order (run_order.h:
 * reversing 10^7 entries, listed newest region first, took 30 ms). A pass over the region list
 * per region visited: malloc_iterate over one mapping visits one or two. */
static const struct region *next_region(const struct region *prev, bool ordered, uintptr_t lo,
                                        uintptr_t hi)
{
    const struct region *r = prev ? prev->next : g_regions;
    if (!ordered) {
        while (r && !region_meets(r, lo, hi))
            r = r->next;
        return r;
    }
    const struct region *best = NULL;
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
static inline __attribute__((always_inline)) void prefetch_records(const struct region *r, size_t w)
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
for_each_live(const struct region *r, size_t first, size_t end,
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
static void bits_in_range(const struct region *r, uintptr_t lo, uintptr_t hi, size_t *first,
                          size_t *end)
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
    record_read(record_of(p), p, &info);
    a->fn(p, &info, a->arg);
}

void hs_md_ptr_foreach_in_locked(uintptr_t lo, uintptr_t hi,
                                 void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                            void *arg),
                                 void *arg)
{
    struct foreach_args a = {fn, arg};
    bool ordered = regions_ordered();
    for (const struct region *r = next_region(NULL, ordered, lo, hi); r;
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
        record_read(record_of(p), p, &info);
        a->out[a->n][0] = p;
        a->out[a->n][1] = info.size;
    }
    a->n++;
}

size_t hs_md_ptr_list_locked(uintptr_t (*out)[2], size_t cap)
{
    struct list_args a = {out, cap, 0};
    bool ordered = regions_ordered();
    for (const struct region *r = next_region(NULL, ordered, 0, UINTPTR_MAX); r;
         r = next_region(r, ordered, 0, UINTPTR_MAX))
        for_each_live(r, 0, REGION_BITS, list_visit, &a);
    return a.n;
}
