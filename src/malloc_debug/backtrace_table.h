/* backtrace_table.h: deduplicated, reference-counted allocation backtraces.
 *
 * Many allocations share a call stack, so each distinct stack is stored once and every
 * tracked allocation holds a counted reference to it. Records live in the shim's private
 * arena. Thread-safe: reference counts are atomic (dropping one takes no lock), the hash
 * chains are split into stripes, each under its own lock.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_BACKTRACE_TABLE_H
#define HEAPSCOPE_MALLOC_DEBUG_BACKTRACE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct hs_md_bt {
    struct hs_md_bt *next; /* hash chain, guarded by the stripe's lock */
    uint64_t hash;
    size_t refs; /* atomic; 0 = dead, never revived */
    uint32_t num_frames;
    uintptr_t frames[]; /* absolute pcs, innermost first */
};

/* Returns the record for these frames with one more reference, creating it if needed.
 * Returns NULL when num_frames is 0 or memory runs out. */
struct hs_md_bt *hs_md_bt_acquire(const uintptr_t *frames, size_t num_frames);

/* Adds a reference to a record already held (NULL is ignored). */
void hs_md_bt_ref(struct hs_md_bt *bt);

/* Drops one reference; the record is freed with the last one. NULL is ignored. */
void hs_md_bt_release(struct hs_md_bt *bt);

/* Number of distinct records (for statistics). */
size_t hs_md_bt_count(void);

void hs_md_bt_lock(void);
void hs_md_bt_unlock(void);

#endif
