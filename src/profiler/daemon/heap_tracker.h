/* heap_tracker.h: the profiler daemon's bookkeeping of one profiled process.
 *
 * The daemon unwinds each malloc sample into a list of pcs and hands it here with the
 * sample's sequence number; frees of sampled blocks come with theirs. The tracker keeps:
 *  - interned frames and a callstack trie: a callsite (a node) is (parent node, pc); the
 *    root is node 0 (the empty stack), so equal stacks share one node and equal prefixes
 *    (outermost frames) share their path;
 *  - per heap (heap 0 is "libc.malloc"; custom heaps 1..255 are declared with
 *    hs_tracker_set_heap) and per callsite: estimated allocated objects and bytes, and
 *    estimated freed objects and bytes (in use = allocated - freed);
 *  - the live table: (heap, address) -> (callsite, true size, sampled size, estimated
 *    objects, sequence number) of every sampled block not yet freed (the same address can be
 *    live in two heaps; a free only frees the block of its own heap);
 *  - the peak of sampled bytes in use (all heaps of the process) and each callsite's in-use
 *    values at that peak ("dump at max"), updated lazily so that a new peak costs O(1).
 *
 * Weights. A sample of `size` true bytes reported as `sampled` bytes (a multiple of the
 * sampling interval in force, or the exact size; see src/profiler/client/sampler.h) counts
 * `sampled` bytes and sampled / size objects (1 when size is 0 or sampled <= size).
 *
 * Ordering. Mallocs and frees of one process share one sequence counter, but records reach
 * the daemon in reservation order, which can differ slightly from sequence order between
 * threads: a free can arrive before the malloc (of the same address, with a smaller
 * sequence number) that it frees. Rules:
 *  - a free whose address is live with a smaller sequence number frees it;
 *  - a free whose address is not live (or live with a larger sequence number: the address
 *    was reused by a later malloc) is kept as a pending free, at most
 *    HS_TRACKER_MAX_PENDING_FREES of them and 16 per address (the oldest is dropped when
 *    full; counted);
 *  - a malloc whose address has a pending free with a larger sequence number is counted as
 *    allocated and freed at once (the pending free is used up); a pending free with a
 *    smaller sequence number is stale (it freed an earlier, unknown block) and is dropped;
 *  - a malloc whose address is live already (its free was lost, or a pending free was
 *    dropped) replaces the old block, which is counted as freed; if the live block has the
 *    larger sequence number, the arriving sample is the one whose free was lost: it is
 *    counted as allocated and freed at once and the live block stays;
 *  - frees of addresses never sampled are ordinary (a sampled-address filter in the client
 *    lets some through): they end up dropped from the pending table, never reported.
 *
 * Memory: everything allocated with malloc (this is the daemon); hs_tracker_memory says how
 * much. Not thread-safe: one thread per tracker.
 */
#ifndef HEAPSCOPE_PROFILER_HEAP_TRACKER_H
#define HEAPSCOPE_PROFILER_HEAP_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HS_TRACKER_MAX_HEAPS 256
#define HS_TRACKER_HEAP_NAME_MAX 64 /* bytes, NUL included */
#define HS_TRACKER_MAX_PENDING_FREES 65536
#define HS_TRACKER_MAX_FRAMES 256 /* deeper stacks keep their innermost frames */

struct hs_tracker;

struct hs_tracker_stats {
    uint64_t mallocs;            /* samples applied */
    uint64_t frees;              /* frees that freed a live sampled block */
    uint64_t frees_unknown;      /* frees dropped: the address was never live */
    uint64_t frees_reordered;    /* frees that arrived before their malloc */
    uint64_t replaced;           /* mallocs over a live address (lost free) */
    uint64_t pending_dropped;    /* pending frees dropped because the table was full */
    uint64_t callsites;          /* trie nodes, root excluded */
    uint64_t live_blocks;        /* entries of the live table */
    uint64_t live_sampled_bytes; /* their sampled bytes, all heaps */
    uint64_t peak_sampled_bytes; /* the peak of live_sampled_bytes */
    uint64_t peak_time_ns;       /* the timestamp of the sample that reached the peak */
};

/* A new, empty tracker (heap 0 named "libc.malloc"), or NULL (out of memory). */
struct hs_tracker *hs_tracker_new(void);
void hs_tracker_free(struct hs_tracker *t);

/* Names custom heap `heap` (1..255; 0 is libc.malloc and can be renamed too) and records
 * its sampling interval (0: unknown). The name is copied, truncated to 63 bytes (NULL: the
 * name is kept). Returns 0, or -1 for a heap number out of range (EINVAL) or out of memory. */
int hs_tracker_set_heap(struct hs_tracker *t, uint32_t heap, const char *name, uint64_t interval);
/* The heap's name, or NULL when heap is out of range or was never named nor used. */
const char *hs_tracker_heap_name(const struct hs_tracker *t, uint32_t heap);
/* True when the heap has at least one sample. */
bool hs_tracker_heap_used(const struct hs_tracker *t, uint32_t heap);

/* A sampled allocation: pcs[0..n) innermost first (absolute; as hs_unwind returns them: the
 * capture point, then call sites, a frame interrupted by a signal exact). ts_ns: the
 * client's timestamp. Returns 0, or -1 (out of memory: the sample is lost and the tracker
 * stays consistent; heap out of range: ignored). */
int hs_tracker_malloc(struct hs_tracker *t, uint32_t heap, uint64_t seq, uint64_t addr,
                      uint64_t size, uint64_t sampled, const uintptr_t *pcs, size_t n,
                      uint64_t ts_ns);

/* A free of a sampled block (see Ordering). Returns 0, or -1 (out of memory). */
int hs_tracker_record_free(struct hs_tracker *t, uint32_t heap, uint64_t seq, uint64_t addr);

void hs_tracker_get_stats(const struct hs_tracker *t, struct hs_tracker_stats *st);

/* The pcs of the trie nodes made since *cursor (0 at first), one per node in the order they
 * were made, at most cap of them; advances *cursor past them. Returns how many: every pc a
 * profile of the tracker can hold comes out once per node holding it. */
size_t hs_tracker_new_pcs(const struct hs_tracker *t, size_t *cursor, uintptr_t *pcs, size_t cap);

/* Bytes the tracker holds (tables, trie, live table). */
size_t hs_tracker_memory(const struct hs_tracker *t);

/* One callsite's values in one heap. Objects are estimates (doubles) summed from the
 * samples' weights; the writer rounds them. */
struct hs_callsite_values {
    double alloc_objects, alloc_bytes;
    double inuse_objects, inuse_bytes; /* now, or at the peak (see hs_tracker_foreach) */
};

/* Calls fn for every callsite of `heap` with a nonzero allocated count, with its stack
 * (pcs innermost first, n of them; valid during the call only) and its values. at_peak:
 * the in-use values are those at the peak of live sampled bytes instead of now (the
 * allocated ones are the totals so far either way). Stops early and returns fn's value when
 * fn returns nonzero; else 0. */
typedef int (*hs_callsite_fn)(const uintptr_t *pcs, size_t n,
                              const struct hs_callsite_values *values, void *arg);
int hs_tracker_foreach(const struct hs_tracker *t, uint32_t heap, bool at_peak, hs_callsite_fn fn,
                       void *arg);

/* Calls fn for every live block of `heap`: its callsite's stack, its true size, its
 * estimated objects and its sampled bytes. Same stopping rule. */
typedef int (*hs_live_block_fn)(const uintptr_t *pcs, size_t n, uint64_t size, double objects,
                                uint64_t sampled, void *arg);
int hs_tracker_foreach_live(const struct hs_tracker *t, uint32_t heap, hs_live_block_fn fn,
                            void *arg);

#endif
