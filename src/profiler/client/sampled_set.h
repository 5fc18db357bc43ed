/* sampled_set.h: the client's set of sampled addresses, so that frees of blocks that were
 * never sampled cost no ring-buffer write.
 *
 * Two levels. A counting filter says "certainly not sampled" for almost every free with two
 * loads: two arrays of 64 Ki one-byte counters, one indexed by the address's 16-byte granule
 * (neighbouring blocks share its cache lines, as nearby frees do), one by a hash of the address;
 * a key may be in the set only when both its counters are nonzero, so with N live sampled
 * blocks a free goes further with a probability of about (N / 65536)^2 (1% at 6,500). Behind
 * it an exact open-addressing table of addresses (256 Ki slots of 8 bytes, 2 MiB mapped
 * lazily; room for about 100,000 live sampled blocks, some 400 MB of heap at 4096) decides.
 * Counters saturate at 255 and then stay there (a permanent "maybe"). A table that
 * cannot place an address within HS_SAMPLED_SET_MAX_PROBE slots switches the set to
 * "overflowed": from then on every free is reported (the daemon ignores frees it does not
 * know), so no free of a sampled block is ever lost.
 *
 * Lock-free (atomic counters, CAS on slots), async-signal-safe, no malloc. An address is
 * inserted after the allocator returned it and removed before it is given back, so an insert
 * and the remove of the same address never race.
 */
#ifndef HEAPSCOPE_PROFILER_SAMPLED_SET_H
#define HEAPSCOPE_PROFILER_SAMPLED_SET_H

#include <stdbool.h>
#include <stdint.h>

#define HS_SAMPLED_SET_FILTER_BITS 16
#define HS_SAMPLED_SET_TABLE_BITS 18
#define HS_SAMPLED_SET_MAX_PROBE 128

extern uint8_t hs_sampled_near[1u << HS_SAMPLED_SET_FILTER_BITS];
extern uint8_t hs_sampled_far[1u << HS_SAMPLED_SET_FILTER_BITS];
extern int hs_sampled_overflowed;

/* The address's 16-byte granule modulo the filter size (custom heaps' keys carry the heap
 * number in their top bits, which this ignores: the other index sees them). */
static inline uint32_t hs_sampled_near_index(uint64_t key)
{
    return (uint32_t)(key >> 4) & ((1u << HS_SAMPLED_SET_FILTER_BITS) - 1);
}

static inline uint32_t hs_sampled_far_index(uint64_t key)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - HS_SAMPLED_SET_FILTER_BITS));
}

/* The fast test: false when key was certainly never inserted (or was removed). */
static inline bool hs_sampled_maybe(uint64_t key)
{
    return (__atomic_load_n(&hs_sampled_near[hs_sampled_near_index(key)], __ATOMIC_RELAXED) != 0 &&
            __atomic_load_n(&hs_sampled_far[hs_sampled_far_index(key)], __ATOMIC_RELAXED) != 0) ||
           __atomic_load_n(&hs_sampled_overflowed, __ATOMIC_RELAXED) != 0;
}

/* Maps the table. Returns 0, or -1 (mmap failed: the set is then overflowed from the start). */
int hs_sampled_set_init(void);

/* Adds key (nonzero, not 1). */
void hs_sampled_insert(uint64_t key);

/* Removes key; true when the free of key must be reported (it was in the set, or the set
 * overflowed). */
bool hs_sampled_remove(uint64_t key);

/* Empties the set (a new session; not concurrently with inserts and removes). */
void hs_sampled_set_reset(void);

#endif
