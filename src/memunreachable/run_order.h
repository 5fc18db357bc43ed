/* run_order.h: sorting a list of allocations that is already a few sorted runs, in place.
 *
 * malloc debug lists its blocks in address order (region by region, 64 MiB of address space
 * each; newest region first when it has more than 1024); glibc's heap walk is in address order
 * per heap. Such a list is a concatenation of a few ascending runs whose ranges of begins do
 * not interleave: sorted, it is the same runs in another order (malloc debug's usually one
 * run per region, already in order). hs_mu_order_runs() finds the runs (one pass), gives each
 * its place from the runs' order by address, and keeps where they are the heaviest set of runs
 * already in the right order relative to one another (or in reverse order, as newest-first
 * regions on a heap that grew upwards: the list and each run are then reversed first); those
 * are moved once each, in the array itself, and the others go through a buffer. The general
 * sort (heap_walker.c's scatter by page) needs a second array as large as the list: at 10^7
 * blocks, 160 MB of fresh memory, whose page faults and clearing cost the check more than the
 * sort.
 *
 * Memory: a descriptor per run and the buffer (the runs that move, at most half the list: with
 * more, the list is left to the general sort), from the caller's arena. No malloc.
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
 * begin within one 64 MiB window, whose ranges of begins do not overlap. Returns 1 when a[] is
 * now sorted (strictly ascending begins), 0 when it is not such a list or more than half of it
 * would have to move (a[] is then left as it was), -ENOMEM when the arena failed (a[] left as
 * it was). */
int hs_mu_order_runs(struct hs_mu_alloc *a, size_t n, struct hs_arena *arena);

#endif
