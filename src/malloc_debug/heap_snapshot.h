/* heap_snapshot.h: a consistent, sorted and merged copy of the live-allocation table.
 *
 * Used by the heap dump (heap_dump.c) and get_malloc_leak_info (leak_info.c), which must show
 * the table as it was at one instant even while other threads allocate and free.
 *
 * Taking a snapshot: every shard of the pointer table is locked (hs_md_ptr_lock_all), so no
 * allocation or free can change the table; each live entry's size, address and backtrace
 * record are copied into an array from the shim's private arena, and each copied backtrace
 * gets one more reference (so that a free right after the locks are dropped cannot delete
 * a record the snapshot still shows). The locks are then released and everything else -
 * sorting, merging, formatting, writing files - happens without them.
 *
 * Lock order: pointer-table shards (all, in index order) -> backtrace table -> arena. The
 * snapshot holds all shards while it takes the backtrace-table lock (once, to add the
 * references); nothing in the shim may take a shard lock while holding the backtrace-table
 * lock. The array is allocated before the shards are locked (and allocated again, larger,
 * if the table grew in between), so no arena call happens under the shard locks.
 *
 * Order and merging (Android's rules, made total): entries are sorted by
 *   1. size, larger first;
 *   2. entries with a backtrace before those without;
 *   3. more frames first;
 *   4. the frames themselves, compared one by one as unsigned pc values, smaller first;
 *   5. address, lower first.
 * Then neighbours with the same size and the same frames (or both without a backtrace) are
 * merged into one entry whose `num` counts them. Because rule 4 groups identical backtraces,
 * every set of identical (size, frames) allocations becomes exactly one entry, and the result
 * is strictly ordered by rules 1-4.
 *
 * Threading: take and release are thread-safe. They must run with the shim's re-entry guard
 * set (hs_md_in_shim) or from code that cannot be inside a tracked allocation, and never in a
 * signal handler (they take spinlocks that the interrupted code may hold). They never call
 * malloc.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_HEAP_SNAPSHOT_H
#define HEAPSCOPE_MALLOC_DEBUG_HEAP_SNAPSHOT_H

#include "backtrace_table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_md_snapshot_entry {
    uintptr_t ptr;       /* address (lowest address of the merged allocations) */
    size_t size;         /* requested size of each allocation */
    size_t num;          /* allocations merged into this entry (1 before merging) */
    struct hs_md_bt *bt; /* backtrace with one reference held by the snapshot, or NULL */
};

struct hs_md_snapshot {
    struct hs_md_snapshot_entry *entries; /* sorted and merged (arena block, or NULL) */
    size_t count;                         /* entries after merging */
    size_t capacity;                      /* entries the arena block holds */
    size_t allocations;                   /* live allocations shown (sum of num) */
    size_t total_memory;                  /* sum of their sizes */
};

/* Flags of hs_md_snapshot_take. */
enum {
    /* Leave out allocations without a backtrace (get_malloc_leak_info). */
    HS_MD_SNAPSHOT_ONLY_WITH_BACKTRACE = 1u << 0,
};

/* Fills *s with the sorted, merged live allocations. Returns false (with *s empty, safe to
 * release) when the arena could not provide the array. */
bool hs_md_snapshot_take(struct hs_md_snapshot *s, unsigned flags);

/* Drops the snapshot's backtrace references and frees its array; leaves *s empty. Safe on an
 * empty snapshot and to call twice. */
void hs_md_snapshot_release(struct hs_md_snapshot *s);

/* The sort order above as an hs_sort comparator (ctx unused) over hs_md_snapshot_entry. */
int hs_md_snapshot_compare(const void *a, const void *b, void *ctx);

/* True when two entries have the same size and the same frames (merge candidates). */
bool hs_md_snapshot_same(const struct hs_md_snapshot_entry *a,
                         const struct hs_md_snapshot_entry *b);

/* Sorts entries[0..n) and merges identical neighbours in place; returns the new count. For
 * every entry merged away, release(bt) is called with its backtrace (also when NULL), so the
 * caller can drop the reference it held; release may be NULL. Pure: touches no global state
 * (public for unit tests). */
size_t hs_md_snapshot_sort_merge(struct hs_md_snapshot_entry *entries, size_t n,
                                 void (*release)(struct hs_md_bt *bt));

#endif
