/* guarded_block.h: a block on pages of its own, as page_guard and sample_guard place them.
 *
 * A guarded block lives in an area (a page_guard run, a sample_guard slot) whose pages are
 * PROT_NONE except the ones the block covers, which are readable and writable while it is
 * live. It is placed so that its end touches the PROT_NONE page after it (rear) or its start
 * follows the PROT_NONE page before it (front), so the first byte read or written past that
 * end faults. malloc's results stay 16-byte aligned (or aligned as memalign asked), so a rear
 * block can end up to alignment-1 bytes short of its page: those bytes (the slack) are filled
 * with the rear guard byte and checked when the block is freed, as the rear guard is.
 *
 * The record of a block is kept apart from the program's memory (a stray write cannot reach
 * it) and stays after the free, with both backtraces, so that a later access to the freed
 * pages is explained. The fault handler reads records without a lock: every field is written
 * before `state` is stored with release order, and a record is never unmapped.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARDED_BLOCK_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARDED_BLOCK_H

#include "backtrace_table.h"
#include "byte_check.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HS_MD_PAGE 4096u

enum hs_md_gblock_state {
    HS_MD_GB_EMPTY = 0, /* no block (never used, or its record was recycled) */
    HS_MD_GB_LIVE,      /* allocated; its pages are readable and writable */
    HS_MD_GB_FREEING,   /* a free is in progress (the thread that won the race) */
    HS_MD_GB_FREED,     /* freed: its pages are PROT_NONE until the area is reused */
    HS_MD_GB_RETIRED,   /* sample_guard_recover: reported, unprotected, never reused */
};

/* The address range a pool of guarded memory reserved ({0, 0} while it has none). */
struct hs_md_addr_range {
    uintptr_t base;
    size_t size;
};

/* True when a is in r: one subtraction and compare, inline (every free asks). */
static inline __attribute__((always_inline)) bool hs_md_in_range(const struct hs_md_addr_range *r,
                                                                 uintptr_t a)
{
    return a - r->base < r->size;
}

struct hs_md_gblock {
    /* Addresses are stored complemented (~address, read them with hs_md_gb_user and the
     * others below), as the pointer table stores its keys: the unreachable-memory detector
     * reads the shim's memory as roots and would take a plain address for a reference that
     * keeps the block reachable, so a leaked guarded block would never be found. */
    uintptr_t user_x;           /* the pointer the program got */
    size_t size;                /* the size the program asked for */
    uintptr_t block_x;          /* the backing block (header mode: header and guards included) */
    size_t block_size;          /* its size; the slack runs from its end to data_end */
    uintptr_t data_x, data_end_x; /* the block's pages (page aligned) */
    struct hs_md_bt *alloc_bt;  /* allocation backtrace (a counted reference) or NULL */
    struct hs_md_bt *free_bt;   /* free backtrace, once freed */
    struct hs_md_gblock *qnext; /* page_guard's quarantine list */
    /* sample_guard alone: glibc's block for the same call (sampled_alloc.h), freed with this
     * one, or 0. Stored plainly: it is the shim's, referenced, never a leak. */
    uintptr_t shadow;
    /* The pointer table's record of the live block (pointer_table.h), kept here rather than
     * in front of the block: the block's pages start at the guard page in front mode. */
    uint64_t track_record[2];
    uint32_t next_free;         /* page_guard's list of free runs (index + 1; 0 ends it) */
    int state;                  /* enum hs_md_gblock_state (atomic) */
    int retire;                 /* sample_guard_recover unprotected a page of it: never reuse */
};

static inline uintptr_t hs_md_gb_user(const struct hs_md_gblock *g)
{
    return ~g->user_x;
}

static inline uintptr_t hs_md_gb_block(const struct hs_md_gblock *g)
{
    return ~g->block_x;
}

static inline uintptr_t hs_md_gb_data(const struct hs_md_gblock *g)
{
    return ~g->data_x;
}

static inline uintptr_t hs_md_gb_data_end(const struct hs_md_gblock *g)
{
    return ~g->data_end_x;
}

static inline void hs_md_gb_set_user(struct hs_md_gblock *g, uintptr_t user)
{
    g->user_x = ~user;
}

static inline uintptr_t hs_md_page_down(uintptr_t a)
{
    return a & ~(uintptr_t)(HS_MD_PAGE - 1);
}

static inline uintptr_t hs_md_page_up(uintptr_t a)
{
    return (a + HS_MD_PAGE - 1) & ~(uintptr_t)(HS_MD_PAGE - 1);
}

/* Where a block of `size` bytes goes in the area [lo, hi) (page aligned) so that
 * block + align_offset is a multiple of align (a power of two >= 16; align_offset a multiple
 * of 16: the header of the guard options sits in front of the user data): as high as
 * possible for a rear block, as low as possible for a front one. Returns 0 when it does not
 * fit. */
static inline uintptr_t hs_md_gblock_place(uintptr_t lo, uintptr_t hi, size_t size, size_t align,
                                           size_t align_offset, bool front)
{
    if (size > hi - lo)
        return 0;
    uintptr_t b;
    if (front) {
        b = ((lo + align_offset + align - 1) & ~(uintptr_t)(align - 1)) - align_offset;
        if (b < lo || b + size > hi)
            return 0;
    } else {
        b = ((hi - size + align_offset) & ~(uintptr_t)(align - 1)) - align_offset;
        if (b < lo || b > hi - size)
            return 0;
    }
    return b;
}

/* Makes g describe a new block of `size` bytes at b whose data bytes are [data, data_end),
 * allocated at alloc_bt (one more reference taken; NULL is fine), not freed. */
static inline void hs_md_gblock_start(struct hs_md_gblock *g, uintptr_t b, size_t size,
                                      uintptr_t data, uintptr_t data_end, struct hs_md_bt *alloc_bt)
{
    g->user_x = g->block_x = ~b;
    g->size = g->block_size = size;
    g->data_x = ~data;
    g->data_end_x = ~data_end;
    hs_md_bt_ref(alloc_bt);
    g->alloc_bt = alloc_bt;
    g->free_bt = NULL;
    g->shadow = 0;
}

/* Fills the slack between the end of the block and the end of its pages. */
static inline void hs_md_gblock_fill_slack(const struct hs_md_gblock *g, uint8_t value)
{
    uintptr_t end = hs_md_gb_block(g) + g->block_size;
    memset((void *)end, value, hs_md_gb_data_end(g) - end);
}

/* Index (from the block's end) of the first slack byte that is not `value`, or the slack's
 * length when all are intact. */
static inline size_t hs_md_gblock_slack_mismatch(const struct hs_md_gblock *g, uint8_t value)
{
    uintptr_t end = hs_md_gb_block(g) + g->block_size;
    return hs_md_first_mismatch((const uint8_t *)end, hs_md_gb_data_end(g) - end, value);
}

#endif
