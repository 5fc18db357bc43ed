/* sampler.h: which allocations the profiler samples (Poisson sampling, as heapprofd).
 *
 * Every allocated byte is sampled independently with probability 1/interval. Each thread
 * keeps a countdown of bytes to its next sample, drawn from an exponential distribution with
 * mean `interval`; an allocation subtracts its size, and every time the countdown reaches
 * zero or below, one more sample is counted and a new countdown is drawn. A sampled
 * allocation is reported as interval * samples bytes, so the expected reported total equals
 * the true total (unbiased). Allocations of interval bytes or more are always reported, with
 * their exact size; interval 1 reports every allocation exactly.
 *
 * Cost: the common case is one subtraction and one predicted branch on thread-local state;
 * the draw (a logarithm) happens once per sample.
 */
#ifndef HEAPSCOPE_PROFILER_SAMPLER_H
#define HEAPSCOPE_PROFILER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

struct hs_sampler_thread {
    int64_t countdown; /* bytes until the next sample; <= 0 before the first draw */
    uint64_t rng;      /* xorshift state; 0 until the first draw seeds it */
    uint64_t mean;     /* the interval the current countdown was drawn with */
};

/* The slow path: counts the samples the allocation of `size` crossed and draws the next
 * countdown. Returns the bytes to report: each sample stands for the mean of the draw that
 * ended at it, so when the interval changes (adaptive sampling) the first sample weighs the
 * old interval and the others the new one, and the estimate stays unbiased. With a fixed
 * interval that is interval * samples. */
size_t hs_sampler_sample_slow(struct hs_sampler_thread *t, uint64_t interval, size_t size);

/* The bytes to report for an allocation of `size` bytes, or 0 when it is not sampled. */
static inline size_t hs_sampler_sample(struct hs_sampler_thread *t, uint64_t interval, size_t size)
{
    if (__builtin_expect(size >= interval, 0))
        return size; /* large (or interval <= size, including interval 1): always, exact */
    t->countdown -= (int64_t)size;
    if (__builtin_expect(t->countdown > 0, 1))
        return 0;
    return hs_sampler_sample_slow(t, interval, size);
}

/* One exponential draw with the given mean (exposed for tests). */
int64_t hs_sampler_draw(struct hs_sampler_thread *t, uint64_t mean);

#endif
