/* glibc_free_chunks.h: the chunks of glibc's heap that are free although the heap walk sees
 * them in use (glibc_malloc.h): the ones in a thread's tcache and in an arena's fastbins, and
 * the tcache_perthread_structs themselves (glibc's bookkeeping, not the program's memory).
 * glibc_heap.c collects them into a sorted set and leaves them out of the allocations.
 *
 * Everything read is untrusted (the snapshot may have caught a thread inside malloc, or the
 * program may have corrupted its heap): an entry is taken only when it is 16-byte aligned,
 * inside a walked heap (the caller's in_heap) and its chunk has the size of its bin; a bad
 * entry ends its list (counted in bad_lists). Lists are followed with a cycle check (Brent's)
 * and a step cap, so a loop never hangs the walk.
 *
 * Which 0x290-byte chunks are tcaches: every entry NULL or a valid free chunk of its bin's
 * size, counts[i] == 0 exactly when entries[i] is NULL (one slot may disagree: a thread caught
 * between the two stores of tcache_put or tcache_get), and at least one entry. An empty tcache
 * is indistinguishable from a zeroed 640-byte block: it stays an allocation (a live thread's
 * tcache is reachable from its TLS, so it is never reported).
 *
 * Reads go through the fault guard (heap_walker.h), which must be installed. Memory from the
 * arena given to init; no malloc. Single-threaded.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_GLIBC_FREE_CHUNKS_H
#define HEAPSCOPE_MEMUNREACHABLE_GLIBC_FREE_CHUNKS_H

#include "arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when [chunk, chunk + size) lies in a heap the walk covers. */
typedef bool (*hs_mu_glibc_in_heap_fn)(uintptr_t chunk, uintptr_t size, void *ctx);

struct hs_mu_glibc_free_chunks {
    struct hs_arena *arena;
    uintptr_t *chunks; /* chunk addresses; sorted and unique after finish */
    size_t num, cap;
    bool out_of_memory;
    size_t tcache_structs;   /* tcache_perthread_structs found */
    size_t tcache_chunks;    /* entries of their lists */
    size_t fastbin_chunks;   /* entries of the fastbins */
    size_t bad_lists;        /* lists cut at a bad entry */
    uintptr_t first_bad_entry; /* for the log line */
};

void hs_mu_glibc_free_chunks_init(struct hs_mu_glibc_free_chunks *set, struct hs_arena *arena);
void hs_mu_glibc_free_chunks_destroy(struct hs_mu_glibc_free_chunks *set);

/* Adds the fastbin chunks of the malloc_state at mstate (readable: the caller checked). */
void hs_mu_glibc_free_chunks_add_fastbins(struct hs_mu_glibc_free_chunks *set, uintptr_t mstate,
                                          hs_mu_glibc_in_heap_fn in_heap, void *ctx);

/* If the in-use 0x290-byte chunk at `chunk` is a tcache_perthread_struct, adds it and its
 * entries and returns true. */
bool hs_mu_glibc_free_chunks_add_tcache(struct hs_mu_glibc_free_chunks *set, uintptr_t chunk,
                                        hs_mu_glibc_in_heap_fn in_heap, void *ctx);

/* Sorts the set (call once, after the adds). Returns false when memory ran out during the
 * adds (the set is then incomplete). */
bool hs_mu_glibc_free_chunks_finish(struct hs_mu_glibc_free_chunks *set);

/* True when chunk is in the (finished) set. */
bool hs_mu_glibc_free_chunks_contains(const struct hs_mu_glibc_free_chunks *set, uintptr_t chunk);

#endif
