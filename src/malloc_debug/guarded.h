/* guarded.h: guarded memory (page_guard's pages, sample_guard's slots) as the rest of the
 * shim sees it.
 *
 * debug_alloc.c asks here for a guarded block first and falls back to glibc when it gets
 * none; every pointer given to free, realloc or malloc_usable_size is checked here first, so
 * that a freed or interior pointer in guarded memory is reported (with the block's
 * allocation and free backtraces) before anything touches its PROT_NONE pages. With both
 * options, page_guard guards every block and sample_guard has no effect.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARDED_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARDED_H

#include "backtrace_table.h"
#include "capture.h"
#include "debug_state.h"
#include "guarded_block.h"
#include "libc_malloc.h"
#include "page_guard.h"
#include "report.h"
#include "sample_guard.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Frames of a guarded block's allocation and free backtraces: backtrace=N's, else 16. */
#define HS_MD_GUARD_DEFAULT_FRAMES 16

static inline size_t hs_md_guard_frames(void)
{
    return (hs_md.cfg.options & HS_OPT_BACKTRACE) ? hs_md.cfg.backtrace_frames
                                                  : HS_MD_GUARD_DEFAULT_FRAMES;
}

/* True when a is in guarded memory: one predicted test when both options are off, else
 * two range checks. */
static inline __attribute__((always_inline)) bool hs_md_guarded_owns(uintptr_t a)
{
    return __builtin_expect(hs_md.guarded, 0) &&
           (hs_md_page_guard_owns(a) || hs_md_sample_guard_owns(a));
}

/* Sets guarded memory up for the options in cfg: the pools and the fault handler. Logs and
 * leaves an option off when the system refuses its memory. */
void hs_md_guarded_init(const struct hs_md_config *cfg);

/* A guarded block for the debug paths: from page_guard when it is on, from sample_guard when
 * `sample` (this allocation was drawn); see hs_md_page_guard_alloc for the arguments. The
 * block takes its own reference to alloc_bt. NULL when the block is not guarded: the caller
 * then allocates from glibc. */
void *hs_md_guarded_alloc(size_t size, size_t align, size_t align_offset, bool zero, bool sample,
                          struct hs_md_bt *alloc_bt);

/* Records the program's view of a guarded block whose header (guard options) puts the user
 * data after the block's start. */
void hs_md_guarded_set_user(void *block, const void *user, size_t size);

/* Where the pointer table keeps the record of the guarded block at p (16 bytes in its
 * guarded record), or NULL when p is not in guarded memory. */
void *hs_md_guarded_track_slot(uintptr_t p);

enum hs_md_guarded_verdict {
    HS_MD_GUARDED_NOT_OURS, /* not in guarded memory: the usual checks apply */
    HS_MD_GUARDED_LIVE,     /* a live block's own pointer (claimed, when asked to claim) */
    HS_MD_GUARDED_QUEUED,   /* freed and waiting in free_track's queue: its checks report it */
    HS_MD_GUARDED_REPORTED, /* a bad pointer, reported: the call must do nothing */
};

/* Checks a pointer given to `function` (free, realloc, malloc_usable_size). With claim, a
 * live block is marked as being freed (so a second free racing this one is seen); *out gets
 * its record. Reports a freed block (DOUBLE FREE, USED AFTER FREE), an interior pointer
 * (INVALID FREE, INVALID POINTER) or a pointer with no block (UNKNOWN POINTER). */
/* The part of hs_md_guarded_check for a pointer in guarded memory (*out already NULL). */
int hs_md_guarded_check_owned(void *ptr, const char *function, bool claim,
                              struct hs_md_gblock **out);

static inline __attribute__((always_inline)) int
hs_md_guarded_check(void *ptr, const char *function, bool claim, struct hs_md_gblock **out)
{
    *out = NULL;
    if (!hs_md_guarded_owns((uintptr_t)ptr))
        return HS_MD_GUARDED_NOT_OURS; /* inline: every free of a glibc block asks */
    return hs_md_guarded_check_owned(ptr, function, claim, out);
}

/* Undoes a claim when the free does not happen after all (another check failed). */
void hs_md_guarded_unclaim(struct hs_md_gblock *g);

/* Frees the claimed block g; takes its own reference to free_bt. */
void hs_md_guarded_release(struct hs_md_gblock *g, struct hs_md_bt *free_bt);

/* Frees the backing block `orig` of the debug paths, guarded (claimed) or glibc's; takes its
 * own reference to free_bt. */
void hs_md_backing_free(void *orig, struct hs_md_bt *free_bt);

/* Usable size of a backing block, guarded or glibc's. */
size_t hs_md_backing_usable_size_owned(void *orig); /* orig in guarded memory */

static inline __attribute__((always_inline)) size_t hs_md_backing_usable_size(void *orig)
{
    if (!hs_md_guarded_owns((uintptr_t)orig))
        return hs_md_libc_usable_size(orig);
    return hs_md_backing_usable_size_owned(orig);
}

/* True when a is on the pages of a live guarded block: pages the shim keeps readable and
 * writable, so a fault there comes from a protection the program set itself (or a detector
 * that reads its memory knowingly, as libmemunreachable's scan does), not from a bug of the
 * kind guarded memory catches. Lock-free. */
bool hs_md_guarded_live_page(uintptr_t a);

/* The records near a for explaining a fault there (at most 3 stored). Lock-free. */
size_t hs_md_guarded_nearby(uintptr_t a, struct hs_md_gblock **out);

/* The backtrace of the calling code for a guarded block (the shim's frames dropped), or NULL
 * (in the shim's own code, or out of memory). Inline, so that it adds no frame of its own.
 * With sample_guard every guarded block is a sampled one: its time counts in the budget. */
static inline __attribute__((always_inline)) struct hs_md_bt *hs_md_guarded_capture(void)
{
    if (hs_md_in_shim)
        return NULL;
    uintptr_t frames[HS_BACKTRACE_MAX_FRAMES];
    hs_md_in_shim++;
    uint64_t start = hs_md.page_guard ? 0 : hs_md_sample_clock();
    size_t n = hs_md_capture(frames, hs_md_guard_frames());
    hs_md_in_shim--;
    struct hs_md_bt *bt = hs_md_bt_acquire(frames, n);
    if (__builtin_expect(!bt && n, 0))
        hs_md_note_out_of_memory();
    hs_md_sample_charge(start);
    return bt;
}

/* Takes / releases the pools' locks (fork handlers, malloc_disable). */
void hs_md_guarded_lock(void);
void hs_md_guarded_unlock(void);

/* Logs the pools' figures (log_allocator_stats_*). */
void hs_md_guarded_log_stats(void);

#endif
