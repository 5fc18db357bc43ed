/* sampler.c: Poisson sampling of allocations (see sampler.h). */
#include "sampler.h"

#include <math.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* xorshift64*: fast, good enough for sampling, and state fits one word. */
static uint64_t next_random(struct hs_sampler_thread *t)
{
    if (t->rng == 0) {
        /* Seed from the thread id and the clock, so threads and runs draw differently. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t->rng = ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)ts.tv_sec << 20) ^ 0x9e3779b97f4a7c15ull;
    }
    uint64_t x = t->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

int64_t hs_sampler_draw(struct hs_sampler_thread *t, uint64_t mean)
{
    /* U uniform in (0, 1]: the top 53 bits plus one, so log(U) is finite. */
    double u = (double)((next_random(t) >> 11) + 1) * (1.0 / 9007199254740992.0);
    double bytes = -log(u) * (double)mean;
    /* At least one byte: a countdown of 0 would sample the next allocation for nothing. */
    return bytes < 1.0 ? 1 : (bytes > 9.0e18 ? INT64_MAX / 2 : (int64_t)bytes + 1);
}

size_t hs_sampler_sample_slow(struct hs_sampler_thread *t, uint64_t interval, size_t size)
{
    if (t->rng == 0 && t->countdown + (int64_t)size <= 0) {
        /* First allocation of the thread: the countdown was never drawn. Draw it and count
         * this allocation against it. */
        t->mean = interval;
        t->countdown = hs_sampler_draw(t, interval) - (int64_t)size;
        if (t->countdown > 0)
            return 0;
    }
    uint64_t first = t->mean != 0 ? t->mean : interval;
    size_t samples = 0;
    while (t->countdown <= 0) {
        t->countdown += hs_sampler_draw(t, interval);
        samples++;
    }
    t->mean = interval;
    return (size_t)first + (samples - 1) * (size_t)interval;
}
