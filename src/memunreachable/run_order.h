/* run_order.h: sorting a list of allocations that is already a few sorted runs, in place.
 *
 * malloc debug lists its blocks region by region (64 MiB of address space each), in address
 * order within a region and newest region first; glibc's heap walk is in address order per
 * heap. Such a list is a concatenation of a few ascending runs whose ranges of begins do not
 * interleave: sorted, it is the same runs in another order. hs_mu_order_runs() puts them in
 * that order by moving each element once, straight to its final place (following the
 * permutation's cycles, with a bit per element to know which have moved), in the array
 * itself. The general sort (heap_walker.c's scatter by page) needs a second array as large as
 * the list: at 10^7 blocks, 160 MB of fresh memory, whose page faults and clearing cost the
 * check more than the sort.
 *
 * The place of an element depends only on its position (its run's target offset plus its
 * offset in the run), never on its contents, so the loads of a cycle do not wait for one
 * another, and consecutive cycles walk the same runs side by side (the cache lines a cycle
 * touches are the next cycle's too).
 *
 * Memory: a bit per element and a descriptor per run, from the caller's arena. No malloc.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_RUN_ORDER_H
#define HEAPSCOPE_MEMUNREACHABLE_RUN_ORDER_H

#include "arena.h"
#include "heap_walker.h"

#include <stddef.h>

/* Most runs hs_mu_order_runs() takes on (a list of more is left to the general sort). */
#define HS_MU_MAX_RUNS 1024

/* A run never crosses a window of 2^26 bytes (64 MiB, malloc debug's region) of begins. */
#define HS_MU_RUN_WINDOW_SHIFT 26

/* Sorts a[0, n) by begin when it is at most HS_MU_MAX_RUNS runs, each strictly ascending by
 * begin within one 64 MiB window, whose ranges of begins do not overlap. Returns 1 when a[] is now sorted (strictly ascending
 * begins), 0 when it is not such a list (a[] is then left as it was), -ENOMEM when the arena
 * failed (a[] left as it was). */
int hs_mu_order_runs(struct hs_mu_alloc *a, size_t n, struct hs_arena *arena);

#endif
