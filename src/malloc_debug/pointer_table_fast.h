/* pointer_table_fast.h: the pointer table's layout and its add and remove, inline.
 *
 * pointer_table.h says what the table is; this header is how it is laid out in memory, so
 * that the short paths of debug_alloc.c (leak_track, verify_pointers, backtrace) add and
 * remove an entry without a call: a call per operation, with the entry passed through the
 * stack, was a fifth of what leak_track added to a malloc/free pair (callgrind). Everything
 * else, and whatever the fast paths hand over (a region to create, a lock held by another
 * thread, guarded memory), is in pointer_table.c.
 *
 * The directory has an entry per 64 MiB region of the 47-bit user address space (2^21
 * entries, 16 MiB of address space mapped untouched: only the pages of used entries are
 * ever committed). A region has a bit per 16 bytes (2^22 bits, 512 KiB, committed page by
 * page as blocks appear), a summary bit per bitmap word (so that listing skips empty words
 * without reading them), its count and its lock. Regions are created once and never freed;
 * the directory entry is published with release order, so a lookup is two loads without a
 * lock.
 *
 * Cost of an add: two stores of the record, two loads, a lock round trip and a bit set;
 * a remove: the same with a bit test and clear, and the record's check.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_FAST_H
#define HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_FAST_H

#include "debug_state.h"
#include "hs_assert.h"
#include "pointer_table.h"
#include "spinlock.h"

#include <stdbool.h>
#include <stdint.h>

#define HS_MD_PT_REGION_SHIFT 26 /* 64 MiB: glibc's HEAP_MAX_SIZE on 64-bit */
#define HS_MD_PT_ADDRESS_BITS 47 /* x86-64 and arm64 user space */
#define HS_MD_PT_DIR_ENTRIES ((size_t)1 << (HS_MD_PT_ADDRESS_BITS - HS_MD_PT_REGION_SHIFT))
#define HS_MD_PT_GRANULE_SHIFT 4 /* malloc's minimum alignment: 16 bytes */
#define HS_MD_PT_REGION_BITS ((size_t)1 << (HS_MD_PT_REGION_SHIFT - HS_MD_PT_GRANULE_SHIFT))
#define HS_MD_PT_REGION_WORDS (HS_MD_PT_REGION_BITS / 64)
#define HS_MD_PT_SUMMARY_WORDS (HS_MD_PT_REGION_WORDS / 64)

_Static_assert(HS_MD_PT_REGION_WORDS % 64 == 0, "a summary word covers 64 bitmap words");
_Static_assert(HS_MD_PTR_MAX_SIZE >> 42 == 0, "the size takes the low 42 bits of a record");

struct hs_md_pt_region {
    hs_spinlock lock;
    size_t count; /* live bits; guarded by lock, read relaxed for statistics */
    size_t peak;  /* highest count so far */
    uintptr_t base;
    struct hs_md_pt_region *next; /* every region, newest first (set before publication) */
    uint64_t *bits;               /* HS_MD_PT_REGION_WORDS words; guarded by lock */
    uint64_t summary[HS_MD_PT_SUMMARY_WORDS]; /* bit w: bits[w] != 0; guarded by lock */
} __attribute__((aligned(64)));

/* The directory: HS_MD_PT_DIR_ENTRIES entries; the pointer and each entry are set once, with
 * release order (pointer_table.c). */
extern struct hs_md_pt_region **hs_md_pt_dir;

/* The record: word 0 holds the size (bits 0-41), the lead shift (42-47) and a check (48-63)
 * over both words and the pointer; word 1 the backtrace. */
struct hs_md_pt_record {
    uint64_t word;
    struct hs_md_bt *bt;
};

_Static_assert(sizeof(struct hs_md_pt_record) == HS_MD_TRACK_RECORD, "a record is 16 bytes");

/* Two multiplications: every bit of the pointer, the fields and the backtrace reaches the
 * top 16 bits, so damage to either word goes unseen about once in 65536. */
static inline uint64_t hs_md_pt_record_check(uintptr_t p, uint64_t fields,
                                             const struct hs_md_bt *bt)
{
    return ((((p ^ (uintptr_t)bt) * 0x9e3779b97f4a7c15ull) ^ fields) * 0xff51afd7ed558ccdull) >> 48;
}

/* Where the record of the block at p is without guarded memory: in front of it. */
static inline struct hs_md_pt_record *hs_md_pt_record_in_front(uintptr_t p)
{
    return (struct hs_md_pt_record *)(p - hs_md.track_offset);
}

static inline void hs_md_pt_record_write(struct hs_md_pt_record *r, uintptr_t p,
                                         const struct hs_md_ptr_info *info)
{
    uint64_t fields = (uint64_t)info->size | (uint64_t)info->lead_shift << 42;
    r->word = fields | hs_md_pt_record_check(p, fields, info->bt) << 48;
    r->bt = info->bt;
}

static inline void hs_md_pt_record_read(const struct hs_md_pt_record *r, uintptr_t p,
                                        struct hs_md_ptr_info *out)
{
    uint64_t word = r->word;
    struct hs_md_bt *bt = r->bt;
    uint64_t fields = word & ((UINT64_C(1) << 48) - 1);
    /* A backtrace record is 16-aligned (arena blocks are): a misaligned one is damage the
     * check missed (1 in 65536), and is not followed either. */
    if (__builtin_expect(word >> 48 != hs_md_pt_record_check(p, fields, bt) || ((uintptr_t)bt & 15),
                         0)) {
        *out = (struct hs_md_ptr_info){0, NULL, 0, true, (uint32_t)(word >> 32)};
        return;
    }
    *out = (struct hs_md_ptr_info){fields & HS_MD_PTR_MAX_SIZE, bt, (unsigned)(fields >> 42), false,
                                   0};
}

/* The region of p, or NULL (none yet, or not a user-space address). Lock-free. */
static inline struct hs_md_pt_region *hs_md_pt_region_of(uintptr_t p)
{
    if (p >> HS_MD_PT_ADDRESS_BITS)
        return NULL;
    struct hs_md_pt_region **dir = __atomic_load_n(&hs_md_pt_dir, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!dir, 0))
        return NULL;
    return __atomic_load_n(&dir[p >> HS_MD_PT_REGION_SHIFT], __ATOMIC_ACQUIRE);
}

/* Where p's bit is in its region. */
struct hs_md_pt_bit {
    size_t word;
    uint64_t mask;
};

static inline struct hs_md_pt_bit hs_md_pt_bit_of(uintptr_t p)
{
    size_t i = (p >> HS_MD_PT_GRANULE_SHIFT) & (HS_MD_PT_REGION_BITS - 1);
    return (struct hs_md_pt_bit){i / 64, UINT64_C(1) << (i % 64)};
}

/* Makes the first access to w's page a write (lock held; before the bit set of an add, which
 * makes a word's first access in a fresh page): a load first would map the shared zero page,
 * and the store after it would fault again and flush the TLB of every CPU the program runs
 * on, an IPI per page (about 80 us on a VM; 728 of them in a 2-thread run allocating
 * 4,000,000 blocks under leak_track). x86 faults an "or" to memory as a write, and or-ing 0
 * changes nothing. */
static inline __attribute__((always_inline)) void hs_md_pt_write_first(uint64_t *w)
{
#if defined(__x86_64__)
    __asm__ volatile("orq $0, %0" : "+m"(*w));
#else
    (void)w;
#endif
}

/* Sets p's bit (lock held); false when it was set already. */
static inline __attribute__((always_inline)) bool hs_md_pt_bit_set(struct hs_md_pt_region *r,
                                                                   struct hs_md_pt_bit b)
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
static inline __attribute__((always_inline)) bool hs_md_pt_bit_clear(struct hs_md_pt_region *r,
                                                                     struct hs_md_pt_bit b)
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

/* Clears r's bit for p and reads its record (r's lock held); a damaged record's bit stays. */
static inline __attribute__((always_inline)) bool
hs_md_pt_take_locked(struct hs_md_pt_region *r, const struct hs_md_pt_record *rec, uintptr_t p,
                     struct hs_md_ptr_info *out)
{
    struct hs_md_pt_bit b = hs_md_pt_bit_of(p);
    if (!hs_md_pt_bit_clear(r, b))
        return false;
    hs_md_pt_record_read(rec, p, out);
    if (__builtin_expect(out->damaged, 0))
        hs_md_pt_bit_set(r, b); /* stays: see pointer_table.h */
    return true;
}

/* The general add and remove (pointer_table.c): a region to create, a lock to wait for,
 * guarded memory. */
bool hs_md_pt_add_general(uintptr_t p, const struct hs_md_ptr_info *info);
bool hs_md_pt_remove_general(struct hs_md_pt_region *r, uintptr_t p, struct hs_md_ptr_info *out);

/* hs_md_ptr_add, inline: the common case (the region exists, its lock is free, no guarded
 * memory) makes no call. */
static inline __attribute__((always_inline)) bool
hs_md_ptr_add_inline(const void *ptr, const struct hs_md_ptr_info *info)
{
    uintptr_t p = (uintptr_t)ptr;
    hs_assert((p & 15) == 0 && info->lead_shift < 64);
    if (__builtin_expect(info->size > HS_MD_PTR_MAX_SIZE, 0))
        return false;
    struct hs_md_pt_region *r = hs_md_pt_region_of(p);
    if (__builtin_expect(!r || hs_md.guarded || !hs_spin_trylock_fast(&r->lock), 0))
        return hs_md_pt_add_general(p, info);
    hs_md_pt_record_write(hs_md_pt_record_in_front(p), p, info);
    struct hs_md_pt_bit b = hs_md_pt_bit_of(p); /* as in hs_md_pt_add_general */
    hs_md_pt_write_first(&r->bits[b.word]);
    hs_md_pt_bit_set(r, b);
    hs_spin_unlock(&r->lock);
    return true;
}

/* hs_md_ptr_remove, inline: the same common case makes no call. */
static inline __attribute__((always_inline)) bool
hs_md_ptr_remove_inline(const void *ptr, struct hs_md_ptr_info *out)
{
    uintptr_t p = (uintptr_t)ptr;
    struct hs_md_pt_region *r = (p & 15) ? NULL : hs_md_pt_region_of(p);
    if (!r)
        return false;
    if (__builtin_expect(hs_md.guarded || !hs_spin_trylock_fast(&r->lock), 0))
        return hs_md_pt_remove_general(r, p, out);
    bool live = hs_md_pt_take_locked(r, hs_md_pt_record_in_front(p), p, out);
    hs_spin_unlock(&r->lock);
    return live;
}

#endif
