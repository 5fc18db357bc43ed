/* backtrace_table.h: deduplicated, reference-counted allocation backtraces.
 *
 * Many allocations share a call stack, so each distinct stack is stored once and every
 * tracked allocation holds a counted reference to it. Records live in the shim's private
 * arena. Thread-safe: reference counts are atomic (dropping one takes no lock), the hash
 * chains are split into stripes, each under its own lock, and in the shim a per-thread cache
 * of references keeps repeated call sites off both (backtrace_table.c).
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

/* Turns the per-thread reference cache on (the shim, at start-up: see backtrace_table.c).
 * Off (unit tests of exact counts), every acquire and release goes to the shared table. */
void hs_md_bt_cache_enable(void);

/* Gives back every reference the calling thread's cache holds (its records may then be
 * freed). For tests; a thread's cache is flushed when it exits. */
void hs_md_bt_cache_flush(void);

/* Number of distinct records (for statistics; records kept by a thread's cache count). */
size_t hs_md_bt_count(void);

void hs_md_bt_lock(void);
void hs_md_bt_unlock(void);

#endif
