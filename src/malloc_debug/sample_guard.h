/* sample_guard.h: sample_guard[=N], GWP-ASan's design on glibc.
 *
 * A fixed pool of guarded slots is reserved at start: sample_guard_slots slots of
 * HS_MD_SAMPLE_SLOT_PAGES pages, with a PROT_NONE page between every two. About one
 * allocation in N (a per-thread countdown drawn uniformly from 1..2N-1, mean N) small enough
 * for a slot is placed in a free slot, against its end or its start (sample_guard_side; by
 * default at random, so that overflows and underflows are both caught over many samples);
 * the others go to glibc untouched. A freed slot is made PROT_NONE and reused last (the free
 * slots are a first-in, first-out ring), so an access after free faults for as long as
 * possible. free() of a pointer inside the pool is a range check away.
 *
 * Memory is bounded: the pool's address space and at most every slot's pages (and, with
 * sample_guard alone, glibc's shadow block of each live sampled one: sampled_alloc.h); nothing
 * grows with the program. The unsampled path costs a thread-local decrement and a predicted
 * branch (malloc) or a range check (free).
 *
 * With sample_guard_recover a fault is reported once and the program goes on: the faulting
 * page is made accessible and the slots next to it are retired (never reused).
 *
 * Threading: one spinlock for the ring of free slots; the fault handler reads records
 * without it.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SAMPLE_GUARD_H
#define HEAPSCOPE_MALLOC_DEBUG_SAMPLE_GUARD_H

#include "guarded_block.h"
#include "options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Data pages of a slot: allocations up to 16 KiB (less alignment) can be sampled. */
#define HS_MD_SAMPLE_SLOT_PAGES 4u

/* Allocations left until this thread's next sample (the countdown). A thread starts at 0,
 * which hs_md_sample_due treats as "not set yet". */
extern __thread int hs_md_sample_left __attribute__((tls_model("initial-exec")));

/* The fast path: false when this allocation is not sampled (almost always). Costs one
 * thread-local decrement and one predicted branch. */
static inline __attribute__((always_inline)) bool hs_md_sample_skip(void)
{
    return __builtin_expect(--hs_md_sample_left > 0, 1);
}

/* The slow path, after hs_md_sample_skip returned false: true when this allocation is
 * sampled. Re-arms the countdown (and sets it up on a thread's first allocation). */
bool hs_md_sample_due(void);

/* The default rate's budget (sample_budget.h): hs_md_sample_clock() at the start of a piece of
 * sampled work (0 unless the rate is the default one), hs_md_sample_charge(start) at its end
 * adds its time to this thread's. */
uint64_t hs_md_sample_clock(void);
void hs_md_sample_charge(uint64_t start);

/* The pool's address range, read by the range check of free. */
extern struct hs_md_addr_range hs_md_sample_range;

static inline __attribute__((always_inline)) bool hs_md_sample_guard_owns(uintptr_t a)
{
    return hs_md_in_range(&hs_md_sample_range, a);
}

/* Reserves the pool. Returns false (nothing reserved) when the system refuses it. */
bool hs_md_sample_guard_init(const struct hs_md_config *cfg);

/* A new block in a free slot (see hs_md_page_guard_alloc for the arguments); zero clears
 * it (a slot's pages keep what the block before wrote). NULL when the block does not fit a
 * slot or no slot is free: the caller then uses glibc. */
void *hs_md_sample_guard_alloc(size_t size, size_t align, size_t align_offset, bool zero,
                               struct hs_md_bt *alloc_bt);

/* Frees a claimed block (guarded.h): checks its slack, makes its pages PROT_NONE and puts
 * the slot at the end of the ring. Takes over the reference to free_bt. */
void hs_md_sample_guard_free(struct hs_md_gblock *g, struct hs_md_bt *free_bt);

/* The record of the slot holding a, or NULL (not in a slot). */
struct hs_md_gblock *hs_md_sample_guard_record(uintptr_t a);

/* The records of the slots next to a (its slot and the two neighbours, or the two slots
 * around a guard page). Returns how many were stored (at most 3). Lock-free. */
size_t hs_md_sample_guard_nearby(uintptr_t a, struct hs_md_gblock **out);

/* sample_guard_recover, from the fault handler: makes the page holding a readable and
 * writable and retires the slots it touches. Async-signal-safe. Returns false when mprotect
 * failed (the program cannot go on). */
bool hs_md_sample_guard_recover(uintptr_t a);

void hs_md_sample_guard_lock(void);
void hs_md_sample_guard_unlock(void);

#endif
