/* glibc_heap.h: the allocations of a process whose malloc is glibc's, found by walking
 * glibc's chunks in the sweeper's snapshot (no tracking, no backtraces): the heap source of
 * a process that was not started under heapscope (injected.h).
 *
 * What is listed (ptr = chunk + 16, size = malloc_usable_size), from the captured maps:
 *   - the main arena's heap: main_arena (in libc's data, not exported) is found by its
 *     signature (empty bins point at themselves, top is a chunk in a writable mapping); its
 *     heap is the [heap] mapping (or, with the brk area merged into .bss, the first page of
 *     the top chunk's mapping from which the chunks lead exactly to top), walked to top;
 *   - every non-main arena's heaps: 64 MiB-aligned regions starting with a valid heap_info,
 *     walked from the first chunk (after the malloc_state in an arena's first heap; the
 *     offset glibc uses is tried first and confirmed by the walk ending exactly at the
 *     arena's top, or at the fenceposts glibc leaves at the end of an older heap);
 *   - mmapped chunks: in writable anonymous mappings, every page start holding a header
 *     {prev_size 0, page-multiple size | IS_MMAPPED} that fits the mapping; consecutive ones
 *     are followed (the kernel merges adjacent mappings). Mappings holding a thread's stack,
 *     the heaps and the capture's excluded ranges are skipped.
 * Left out: the top chunks, fenceposts, free chunks, and the chunks that are free but look
 * in use (tcache and fastbin chunks, and the tcache structs: glibc_free_chunks.h).
 *
 * The snapshot may have caught threads inside malloc (nothing stops them at a safe point), or
 * the program may have corrupted its heap: every header is read inside its mapping under the
 * fault guard, a chunk that does not fit (size not a multiple of 16, beyond the heap, flags
 * that disagree with the arena) ends the walk of its heap (counted, logged once), lists are
 * bounded. Not finding main_arena fails the walk (-ENOTSUP): its fastbins could not be left
 * out. A heap that cannot be walked at all is left out; what the roots rules then do with its
 * memory can only hide leaks, never invent them.
 *
 * Limits: glibc 2.32+ on x86_64 (safe-linking, the layouts of glibc_malloc.h); a main arena
 * that is not contiguous (foreign sbrk, or mmap after brk failed) is walked only up to the
 * first gap; a large block from memalign is listed from the start of its mapping.
 *
 * Runs in the sweeper (or a test): single-threaded, no malloc, memory from the arena; the
 * fault guard (heap_walker.h) must be installed.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_GLIBC_HEAP_H
#define HEAPSCOPE_MEMUNREACHABLE_GLIBC_HEAP_H

#include "capture.h"

#include <stddef.h>
#include <stdint.h>

struct hs_mu_glibc_heap_stats {
    uintptr_t main_arena;  /* its address; 0 when not found */
    size_t arenas;         /* malloc_states: main_arena and each non-main arena */
    size_t heaps;          /* heaps walked: the main one and the non-main arenas' */
    size_t locked_arenas;  /* arenas whose lock was held at the capture */
    size_t chunks;         /* blocks listed from the heaps */
    size_t mmapped_chunks; /* blocks listed from mmapped chunks */
    size_t tcache_structs; /* left out, with: */
    size_t tcache_chunks;
    size_t fastbin_chunks;
    size_t bad_heaps; /* heaps whose walk stopped at an inconsistent chunk */
    size_t bad_lists; /* tcache or fastbin lists cut at an inconsistent entry */
};

/* Lists every allocation of the snapshot described by capture (its maps, thread stack
 * pointers and excluded ranges) whose pointer lies in [base, base + size), by calling
 * callback(ptr, usable size, arg). stats may be NULL. Returns 0, -ENOTSUP when main_arena
 * was not found (logged), or -ENOMEM. */
int hs_mu_glibc_heap_walk(const struct hs_mu_capture *capture, struct hs_arena *arena,
                          uintptr_t base, size_t size,
                          void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg,
                          struct hs_mu_glibc_heap_stats *stats);

/* The heap source over hs_mu_glibc_heap_walk: prepare records the capture and the arena for
 * iterate (process-global: the sweeper is single-threaded); no backtraces, group_by_size set,
 * no disable/enable (glibc has no such calls: threads are stopped wherever they are). */
void hs_mu_glibc_heap_source(struct hs_mu_heap_source *heap);

#endif
