/* clock.h: nanosecond clock readings, written once. clock_gettime is async-signal-safe and
 * goes through the vDSO: fine inside malloc hooks and signal handlers. */
#ifndef HEAPSCOPE_COMMON_CLOCK_H
#define HEAPSCOPE_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* The clock's time in nanoseconds (CLOCK_MONOTONIC for intervals and deadlines,
 * CLOCK_REALTIME for time stamps). */
static inline uint64_t hs_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t hs_monotonic_ns(void)
{
    return hs_clock_ns(CLOCK_MONOTONIC);
}

#endif
