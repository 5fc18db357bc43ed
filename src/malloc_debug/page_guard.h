/* page_guard.h: page_guard[=rear|front], every allocation on pages of its own.
 *
 * Each block gets pages of its own in a reservation of address space, placed so that its end
 * touches a PROT_NONE page (rear) or its start follows one (front) (guarded_block.h). A freed
 * block's pages are made PROT_NONE at once (their memory goes back to the kernel) and the
 * address range waits in a quarantine of page_guard_quarantine MiB before it is reused, so a
 * late access to a freed block faults as well. The fault handler (guard_fault.c) explains
 * both kinds of faults with the records kept here.
 *
 * Cost: two system calls per block (mprotect at allocation, mmap at free) and at least one
 * page of memory per live block. The kernel's vm.max_map_count bounds the live blocks (each
 * is a mapping of its own, plus the PROT_NONE mapping after it): past a budget that leaves the
 * program room for its own mappings, new blocks come from glibc, unguarded, until enough are
 * freed (logged once). Blocks larger than the biggest run, or when a run size's address space
 * is used up, come from glibc too.
 *
 * Threading: one lock per run size and one for the quarantine, never held together nor
 * while calling into the rest of the shim. The fault handler reads records without locks.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_PAGE_GUARD_H
#define HEAPSCOPE_MALLOC_DEBUG_PAGE_GUARD_H

#include "guarded_block.h"
#include "options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reserves the address space. Returns false (nothing reserved) when the system refuses it. */
bool hs_md_page_guard_init(const struct hs_md_config *cfg);

/* The reservation's address range (0, 0 when page_guard is off), read by the range check. */
extern struct hs_md_addr_range hs_md_page_guard_range;

/* True when a is in page_guard's reservation: a range check, inline (every free asks). */
static inline __attribute__((always_inline)) bool hs_md_page_guard_owns(uintptr_t a)
{
    return hs_md_in_range(&hs_md_page_guard_range, a);
}

/* A new block of `size` bytes with block + align_offset a multiple of align, its memory
 * zeroed (fresh pages) and its slack filled; it takes a reference to alloc_bt. Returns NULL
 * when the block cannot be guarded (budget, size, address space): the caller then uses glibc. */
void *hs_md_page_guard_alloc(size_t size, size_t align, size_t align_offset,
                             struct hs_md_bt *alloc_bt);

/* Frees a block hs_md_guarded_claim (guarded.h) has claimed: checks its slack, makes its
 * pages PROT_NONE and queues it in the quarantine. Takes over the reference to free_bt. */
void hs_md_page_guard_free(struct hs_md_gblock *g, struct hs_md_bt *free_bt);

/* The record of the run holding a, or NULL (not in the reservation, or never used). */
struct hs_md_gblock *hs_md_page_guard_record(uintptr_t a);

/* The records of the run holding a and of its two neighbours that hold or held a block, for
 * explaining a fault at a. Returns how many were stored in out (at most 3). Lock-free. */
size_t hs_md_page_guard_nearby(uintptr_t a, struct hs_md_gblock **out);

/* Live blocks and quarantined bytes, for the allocator statistics. */
void hs_md_page_guard_stats(size_t *live, size_t *quarantined_bytes);

void hs_md_page_guard_lock(void);
void hs_md_page_guard_unlock(void);

#endif
