/* pointer_table.h: the live-allocation table of the tracking options.
 *
 * Every live allocation made with backtrace, leak_track, free_track or verify_pointers on
 * has an entry: its size and its allocation backtrace (or NULL). The table is split into
 * shards, each an open-addressing hash table under its own spinlock, so that threads
 * allocating at the same time rarely meet. Keys are stored encoded (~pointer) so that a
 * conservative scanner (the unreachable-memory detector) reading the table does not take
 * them for references. Table memory comes from the shim's private arena.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_H
#define HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_H

#include "backtrace_table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_md_ptr_info {
    size_t size;         /* requested size */
    struct hs_md_bt *bt; /* allocation backtrace (a counted reference), or NULL */
};

/* Adds ptr; takes over the caller's reference to info->bt. Returns false when memory for
 * the table ran out (the allocation then goes untracked). */
bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info);

/* Puts back an entry its caller has just removed (a check failed after all, or the block
 * stays with a new size), never growing the shard: the slot it left is there, so this fails
 * only when other threads filled the shard to its last free slot meanwhile. Takes over the
 * reference to info->bt; false leaves it with the caller. */
bool hs_md_ptr_restore(const void *ptr, const struct hs_md_ptr_info *info);

/* Removes ptr and stores what it had in *out (the caller now owns the bt reference).
 * Returns false when ptr is not a live tracked allocation. */
bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out);

/* True when ptr is live; fills *out (without taking a reference) when out is not NULL. */
bool hs_md_ptr_find(const void *ptr, struct hs_md_ptr_info *out);

/* Same, but *out gets a new reference to the backtrace (release it with hs_md_bt_release):
 * taken under the table lock, so the record cannot be freed in between. */
bool hs_md_ptr_find_ref(const void *ptr, struct hs_md_ptr_info *out);

/* Number of live entries. */
size_t hs_md_ptr_count(void);

/* The most entries the table has held (the sum of each shard's peak: an upper bound). */
size_t hs_md_ptr_peak(void);

/* Locks / unlocks every shard (fork, malloc_disable, heap dumps). */
void hs_md_ptr_lock_all(void);
void hs_md_ptr_unlock_all(void);

/* Calls fn for every live entry; the caller must hold all shard locks. fn must not
 * allocate through the shim or touch the table. */
void hs_md_ptr_foreach_locked(void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                         void *arg),
                              void *arg);

/* Writes the first cap live entries to out as {pointer, requested size} pairs, shard by shard
 * (in no address order), and returns how many entries are live (possibly more than cap). The
 * caller must hold all shard locks. One pass over the slots, no call per entry: how the
 * unreachable-memory check lists 10^7 blocks. */
size_t hs_md_ptr_list_locked(uintptr_t (*out)[2], size_t cap);

#endif
