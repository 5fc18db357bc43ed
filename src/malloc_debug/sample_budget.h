/* sample_budget.h: how sample_guard's default rate keeps its cost bounded.
 *
 * A sampled block costs two mprotect calls, and in a process whose threads run on several
 * CPUs the one at free also makes the kernel interrupt every other CPU running the process to
 * flush its TLB: from ~7 us per sampled block on one CPU to 40 us and more on a busy
 * multi-CPU virtual machine. A fixed rate cannot be cheap everywhere, so `sample_guard`
 * without a value (one in 5000) measures: each thread adds up the time its own sampled
 * allocations and frees spend in the pool, and at every sample after a window of
 * HS_MD_SAMPLE_WINDOW_NS, compares it with the time elapsed. Over the budget (0.5% of the
 * thread's time: what is measured leaves out the backtraces and the interrupts other CPUs
 * take, about as much again), the next countdowns are drawn twice as long; under a quarter of
 * it, half as long again, never shorter than the configured rate. `sample_guard=N` samples one in N
 * whatever it costs (N=1 samples every allocation that fits a slot).
 *
 * Pure arithmetic, kept apart so that it can be tested alone.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SAMPLE_BUDGET_H
#define HEAPSCOPE_MALLOC_DEBUG_SAMPLE_BUDGET_H

#include <stdint.h>

#define HS_MD_SAMPLE_BUDGET_PER_MILLE 5
#define HS_MD_SAMPLE_WINDOW_NS (20ull * 1000 * 1000)
#define HS_MD_SAMPLE_MAX_SCALE 1024u

/* The countdown multiplier for the next window, from the time the thread spent in sampled
 * work during this one (spent) out of the time that elapsed: doubled when over the budget,
 * halved when under a quarter of it, within 1..HS_MD_SAMPLE_MAX_SCALE. */
static inline uint32_t hs_md_sample_next_scale(uint32_t scale, uint64_t spent, uint64_t elapsed)
{
    if (scale < 1)
        scale = 1;
    if (spent * 1000 > elapsed * HS_MD_SAMPLE_BUDGET_PER_MILLE)
        return scale >= HS_MD_SAMPLE_MAX_SCALE / 2 ? HS_MD_SAMPLE_MAX_SCALE : scale * 2;
    if (spent * 4000 < elapsed * HS_MD_SAMPLE_BUDGET_PER_MILLE && scale > 1)
        return scale / 2;
    return scale;
}

#endif
