/* heap_walker.h: the mark half of the unreachable-memory detector.
 *
 * The walker holds the live allocations of the snapshot as sorted, non-overlapping ranges
 * [begin, end), the roots (memory ranges and single register values), and a mark bit per
 * allocation. hs_mu_heap_walker_mark() marks every allocation reachable from the roots: a
 * word is a reference when it is 8-byte aligned in memory and its value lies anywhere inside
 * an allocation (begin <= value < end: interior pointers count, one past the end does not).
 * Marking keeps what is marked but not yet scanned in explicit structures (a bitmap, then a
 * stack; each allocation enters once), never recursion. What stays unmarked is unreachable
 * (leak_folding.h).
 *
 * Order of marking: reading allocations in the order they are discovered (a stack or a queue)
 * jumps around the heap, and each jump costs a TLB and cache miss that the hardware prefetcher
 * cannot hide (reading 10^6 blocks of 1000 bytes in random order takes ~10x longer than in
 * address order on the machine measured). So marked allocations are kept in a bitmap and
 * scanned in passes in address order; what a pass marks behind its position waits for the next
 * pass. When fewer than num_allocs / 64 + 64 allocations remain pending (the frontier of a
 * deep list, say), passes would mostly walk an empty bitmap, so the rest is finished
 * depth-first with an explicit stack. Every allocation is scanned exactly once either way.
 *
 * Lookup ("is this word a heap pointer?"), the hot path, costs one subtraction and one
 * compare for the great majority of words (those outside [lowest begin, highest end)); a
 * word inside that span costs a probe of an open-addressing hash of 4 KiB address regions
 * (region -> the run of allocations overlapping it, typically a handful) and a binary search
 * within the run. On a big heap each of these, and the mark byte, is a cache miss, so marking
 * looks candidates up in batches of HS_MU_BATCH with prefetches between the steps (the misses
 * of a batch overlap instead of following one another). Allocations spanning more than
 * HS_MU_BIG_REGIONS regions are not entered region by region (a huge untouched malloc would blow
 * the table up) but kept in a short sorted list searched when the hash has no answer.
 *
 * Fault tolerance: all reads of the snapshot's memory (root ranges, allocations, contents)
 * go through a guard. hs_mu_fault_guard_install() installs SIGSEGV/SIGBUS handlers; while a
 * range is being read, a fault on one of its pages maps a zero page (PROT_READ) over the
 * faulting page and returns, so the read is retried and sees zeros. The first skipped page
 * is logged; all are counted. A fault outside the range being read restores the previous
 * handler and returns, so the fault happens again and is handled as it would have been
 * without the guard (a real bug still crashes).
 *
 * Memory: everything comes from the caller's hs_arena (never malloc). For n allocations:
 * 16n bytes of ranges (+16n while sorting), n mark bytes, n/8 bytes of pending bits, 4n bytes
 * of work stack, and the region table (16 bytes per slot, 2 to 4 slots per 4 KiB region
 * holding small allocations).
 *
 * Threading and signals: a walker is used by one thread. The fault guard is process-global
 * state for the single-threaded sweeper (and single-threaded tests); its handler is
 * async-signal-safe (mmap, sigaction, hs_log). Nothing here calls malloc or stdio.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_HEAP_WALKER_H
#define HEAPSCOPE_MEMUNREACHABLE_HEAP_WALKER_H

#include "arena.h"
#include "capture.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tag of the sweeper's log lines. */
#define HS_MU_LOG_TAG "memunreachable"

/* log2 of the region size of the lookup table (4 KiB). */
#define HS_MU_REGION_SHIFT 12
/* Allocations overlapping more regions than this go to the "big" list (256 KiB). */
#define HS_MU_BIG_REGIONS 64
/* Candidate words looked up together while marking. */
#define HS_MU_BATCH 64
/* "No allocation" index. */
#define HS_MU_NONE ((size_t)-1)

struct hs_mu_alloc {
    uintptr_t begin, end; /* [begin, end); end > begin (a 0-byte allocation is given 1 byte) */
};

/* A root range. */
struct hs_mu_root {
    uintptr_t begin, end;
    unsigned flags; /* HS_MU_ROOT_* */
};

/* The range holds glibc's malloc state (main_arena, in libc's data): its top, bins and
 * last-remainder pointers point at chunk headers, and glibc lends the first word of a chunk's
 * header (prev_size) to the chunk below it, so such a pointer lands in the last 8 bytes of the
 * allocation below. In these ranges a word that is 16-byte aligned and lies in the last 8 bytes
 * of an allocation (and is not its first byte) is a chunk pointer, not a reference. */
#define HS_MU_ROOT_MALLOC_STATE 1u

/* One entry of the region table: the allocations overlapping one region are
 * allocs[first, first + count). key is region number + 1, 0 marks an empty slot. */
struct hs_mu_region {
    uintptr_t key;
    uint32_t first;
    uint32_t count;
};

struct hs_mu_heap_walker {
    struct hs_arena *arena;

    /* Allocations: sorted by begin and non-overlapping after hs_mu_heap_walker_finish. */
    struct hs_mu_alloc *allocs;
    size_t num_allocs, cap_allocs;
    size_t allocation_bytes;    /* sum of end - begin */
    size_t dropped_overlapping; /* ranges dropped because they overlapped another */
    bool finished;
    bool out_of_memory; /* an add failed: the result would be wrong, callers must give up */

    /* Mark state. A newly marked allocation waits to be scanned either in `pending` (a bit
     * per allocation, scanned in address order) or, once few are left, on the `work` stack. */
    uint8_t *marked;   /* one byte per allocation */
    uint64_t *pending; /* (num_allocs + 63) / 64 words */
    size_t num_pending;
    uint32_t *work; /* capacity num_allocs */
    size_t num_work;
    bool use_stack; /* new marks go to work[] instead of pending[] */
    size_t num_marked;
    /* Words that passed the range test, looked up HS_MU_BATCH at a time (see heap_walker.c). */
    uintptr_t batch[HS_MU_BATCH];
    size_t num_batch;
    bool chunk_filter; /* scanning a HS_MU_ROOT_MALLOC_STATE range */

    /* Lookup. span == 0 when there are no allocations (every lookup fails the range test). */
    uintptr_t min;  /* allocs[0].begin */
    uintptr_t span; /* highest end - min */
    struct hs_mu_region *regions;
    size_t region_mask; /* table size - 1 (a power of two) */
    uint32_t *big;      /* indices of big allocations, ascending */
    size_t num_big;
    uintptr_t big_min, big_span;

    /* Roots. */
    struct hs_mu_root *roots;
    size_t num_roots, cap_roots;
    uintptr_t *root_values;
    size_t num_root_values, cap_root_values;
};

/* Prepares an empty walker whose memory comes from arena. Cannot fail. */
void hs_mu_heap_walker_init(struct hs_mu_heap_walker *w, struct hs_arena *arena);

/* Returns all the walker's memory to its arena. The walker may be initialised again. */
void hs_mu_heap_walker_destroy(struct hs_mu_heap_walker *w);

/* Adds the allocation [begin, begin + size) (size 0 counts as 1 byte). Only before
 * hs_mu_heap_walker_finish. Returns false when memory ran out (w->out_of_memory is then
 * set and later calls fail too). Allocation-free apart from the arena: safe to call from a
 * malloc_iterate callback. */
bool hs_mu_heap_walker_add_allocation(struct hs_mu_heap_walker *w, uintptr_t begin, size_t size);

/* Lists every allocation of heap with heap->iterate (the whole address space) and adds it.
 * Returns 0, -ENOTSUP when iterate is missing or fails, -ENOMEM when memory ran out. */
int hs_mu_heap_walker_collect(struct hs_mu_heap_walker *w, const struct hs_mu_heap_source *heap);

/* Sorts the allocations, drops any range overlapping an earlier one (logged once), and
 * builds the lookup table and the mark state. Returns 0 or -ENOMEM (too many allocations for
 * 32-bit indices also gives -ENOMEM). After it, no allocation may be added. */
int hs_mu_heap_walker_finish(struct hs_mu_heap_walker *w);

/* Roots. Ranges are scanned from begin rounded up to 8 to end rounded down to 8; empty and
 * inverted ranges are ignored. Return false when memory ran out. */
bool hs_mu_heap_walker_add_root(struct hs_mu_heap_walker *w, uintptr_t begin, uintptr_t end);
bool hs_mu_heap_walker_add_root_flags(struct hs_mu_heap_walker *w, uintptr_t begin, uintptr_t end,
                                      unsigned flags);
bool hs_mu_heap_walker_add_root_value(struct hs_mu_heap_walker *w, uintptr_t value);

/* The index of the allocation containing addr, or HS_MU_NONE. Only after finish. */
size_t hs_mu_heap_walker_find_slow(const struct hs_mu_heap_walker *w, uintptr_t addr);
static inline size_t hs_mu_heap_walker_find(const struct hs_mu_heap_walker *w, uintptr_t addr)
{
    if (__builtin_expect(addr - w->min >= w->span, 1))
        return HS_MU_NONE;
    return hs_mu_heap_walker_find_slow(w, addr);
}

/* The index of the first allocation whose end is above addr (the first one that could
 * overlap [addr, ...)), or num_allocs. Only after finish. */
size_t hs_mu_heap_walker_first_ending_after(const struct hs_mu_heap_walker *w, uintptr_t addr);

/* Marks everything reachable from the roots added so far (call once, after finish and the
 * roots). Reads memory under the fault guard, which must be installed. */
void hs_mu_heap_walker_mark(struct hs_mu_heap_walker *w);

static inline bool hs_mu_heap_walker_is_marked(const struct hs_mu_heap_walker *w, size_t i)
{
    return w->marked[i] != 0;
}

/* ---- Fault guard ------------------------------------------------------------------------ */

/* Installs the SIGSEGV and SIGBUS handlers (saving the previous ones) and unblocks both
 * signals in this thread. Returns 0 or an errno value. Not nestable. */
int hs_mu_fault_guard_install(void);

/* Restores the handlers saved by install (and the signal mask). */
void hs_mu_fault_guard_remove(void);

/* Pages replaced by zero pages since install. */
size_t hs_mu_fault_guard_skipped_pages(void);

/* Declares [begin, end) as the range being read: faults on its pages are repaired. end ==
 * begin clears it. Cheap (two stores and a compiler barrier). */
void hs_mu_fault_guard_enter(uintptr_t begin, uintptr_t end);
void hs_mu_fault_guard_leave(void);

/* Copies len bytes at src to dst under the guard, word by word where aligned and never
 * reading outside [src, src + len): unreadable pages read as zeros. */
void hs_mu_read_guarded(void *dst, uintptr_t src, size_t len);

#endif
