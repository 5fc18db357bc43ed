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
 * deep list, say), passes would mostly walk an empty bitmap, so the rest goes depth-first with
 * an explicit stack of that size; and when it fans out again (a program whose roots hold one
 * array that holds everything: the fan-out comes after the frontier was narrow), marks past a
 * full stack wait in the bitmap, and once that many wait the stack joins them for passes again
 * (in stack order, a million 1000-byte blocks took 3x as long). Every allocation is scanned
 * exactly once either way.
 *
 * Lookup ("is this word a heap pointer?"), the hot path, costs one subtraction and one
 * compare for the great majority of words (those outside [lowest begin, highest end)). A word
 * inside that span is looked up in a page table: the address space is cut into 2 MiB pages,
 * grouped in 1 GiB windows (a small hash of windows, each an array of page entries: it stays
 * in cache), which gives for each page the run of allocations that begin in it,
 * allocs[base, base + count). A page
 * where more than HS_MU_PAGE_RUN allocations begin also has a slot array that cuts the run
 * into about one allocation per slot (as many slots as allocations, a power of two, slots of
 * 256 bytes at the smallest). The allocation holding the word is the last one beginning at or
 * below it: found by a binary search in its slot (a handful at most), else it is the one just
 * before the slot's first, allocs[lo - 1], which may begin pages earlier. So an allocation
 * running over a page end needs no entry in the next page's run: the pages it covers get an
 * entry with an empty run, except for allocations covering more than HS_MU_BIG_PAGES pages,
 * kept in a short sorted list searched when the page table has no entry. On a big heap the
 * slot, the allocation and the mark byte are each a cache miss, so marking looks candidates
 * up in batches of HS_MU_BATCH with prefetches between the steps (the misses of a batch
 * overlap instead of following one another).
 *
 * Building the index is a counting sort, not a comparison sort: listing counts each
 * allocation in its page; the allocations are then scattered into page order (one pass, with
 * sequential reads; an in-place permutation was slower: a dependent random read per move), and
 * each page's run, a few hundred KiB at most and so in cache, is sorted by slot through a
 * buffer and within each slot by insertion. A list that is a few sorted runs (malloc debug's,
 * region by region) is instead put in order in place, runs moved whole (run_order.h), and each
 * page's slots are counted without moving anything: no second array (160 MB of fresh memory
 * at 10^7 blocks, whose page faults cost more than the sort).
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
 * 16n bytes of ranges (+16n while sorting a list that is not a few sorted runs; the list grows
 * by mremap, never copied), n/8
 * bytes of mark bits and as many of pending bits, 4 to 8 bytes per allocation of slot arrays,
 * the page table (16 KiB per 1 GiB window holding allocations), and a work stack of n/16 + 256
 * bytes.
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

/* The lookup index cuts the address space into 2 MiB pages (see the header comment). */
#define HS_MU_PAGE_SHIFT 21
#define HS_MU_PAGE_BYTES ((uintptr_t)1 << HS_MU_PAGE_SHIFT)
/* Pages per window of the page table's first level (1 GiB windows). */
#define HS_MU_WINDOW_SHIFT 9
#define HS_MU_WINDOW_PAGES ((uintptr_t)1 << HS_MU_WINDOW_SHIFT)
/* A page where more allocations than this begin gets a slot array. */
#define HS_MU_PAGE_RUN 8
/* Smallest slot of a slot array (256 bytes: 8192 slots per page). */
#define HS_MU_MIN_SLOT_SHIFT 8
/* Allocations covering more pages than this go to the "big" list (128 MiB). */
#define HS_MU_BIG_PAGES 64
/* Candidate words looked up together while marking. */
#define HS_MU_BATCH 64
/* A page without a slot array. */
#define HS_MU_NO_SLOTS UINT32_MAX
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

/* One entry of the page table: page number + 1 as the key (0 marks an empty entry), the
 * allocations that begin in the page, allocs[base, base + count), and for a dense page its slot
 * array: slots[slots .. slots + 2^(HS_MU_PAGE_SHIFT - slot_shift)], where entry k is the index of
 * the first allocation beginning in slot k or above (the last entry ends the page's run). */
struct hs_mu_page {
    uintptr_t key;
    uint32_t base;
    uint32_t count;
    uint32_t slots; /* offset into the walker's slots[], or HS_MU_NO_SLOTS */
    uint32_t fill;  /* while sorting */
    uint8_t slot_shift;
};

/* A 1 GiB window of the page table: its HS_MU_WINDOW_PAGES page entries. key is window
 * number + 1, 0 marks an empty entry of the window hash. */
struct hs_mu_window {
    uintptr_t key;
    struct hs_mu_page *pages;
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
    bool sorted_in_place; /* the list was a few sorted runs, put in order in place (run_order.h) */

    /* Mark state. A newly marked allocation waits to be scanned either in `pending` (a bit
     * per allocation, scanned in address order) or, once few are left, on the `work` stack. */
    uint64_t *marked;  /* a bit per allocation, (num_allocs + 63) / 64 words */
    uint64_t *pending; /* (num_allocs + 63) / 64 words */
    size_t num_pending;
    uint32_t *work; /* capacity cap_work (num_allocs / 64 + 64) */
    size_t num_work, cap_work;
    bool use_stack; /* new marks go to work[] instead of pending[] */
    size_t num_marked;
    size_t num_pass_scans; /* allocations scanned by a pass in address order (not depth-first) */
    /* Words that passed the range test, looked up HS_MU_BATCH at a time (see heap_walker.c). */
    uintptr_t batch[HS_MU_BATCH];
    size_t num_batch;
    bool chunk_filter; /* scanning a HS_MU_ROOT_MALLOC_STATE range */

    /* Lookup. span == 0 when there are no allocations (every lookup fails the range test). */
    uintptr_t min;                /* allocs[0].begin */
    uintptr_t span;               /* highest end - min */
    struct hs_mu_window *windows; /* open addressing, at most half full; NULL when empty */
    size_t window_mask;           /* table size - 1 (a power of two) */
    size_t num_windows, num_pages;
    struct hs_mu_page *last_page; /* the entry used last while listing */
    uintptr_t last_window;        /* the window number of last_window_pages */
    struct hs_mu_page *last_window_pages; /* the window used last while listing, or NULL */
    uint32_t *slots;              /* the dense pages' slot arrays */
    size_t num_slot_words;
    uint32_t *big; /* indices of big allocations, ascending */
    size_t num_big, cap_big;
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

/* Lists every allocation of heap and adds it: with heap->list when the source has it (all at
 * once, into the walker's array), else with heap->iterate (the whole address space). Returns
 * 0, -ENOTSUP when both are missing or the one used fails, -ENOMEM when memory ran out. */
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
    return (w->marked[i / 64] >> (i % 64)) & 1;
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
