/* sampled_set.h: the client's set of sampled addresses, so that frees of blocks that were
 * never sampled cost no ring-buffer write.
 *
 * Three levels. First the address itself: the client places every block it samples at an
 * address aligned to HS_SAMPLED_ALIGN (hooks.c allocates it with memalign), so a free of any
 * other address is "certainly not sampled" by a test of its low bits, without a load (glibc
 * hands out 16-byte aligned blocks: 1 in 64 of the unsampled frees goes further). Then a counting
 * filter says "certainly not sampled" for almost every remaining free with one or two loads: two
 * arrays of 64 Ki one-byte counters, one indexed by the address's HS_SAMPLED_ALIGN granule (a
 * 64 MiB period), one by a hash of the address; a key may be in the set only when both its
 * counters are nonzero, so with N live sampled blocks a free goes further with a probability of
 * about (N / 65536)^2 (1% at 6,500). Behind it an exact open-addressing table of addresses
 * (256 Ki slots of 8 bytes, 2 MiB mapped lazily; room for about 100,000 live sampled blocks,
 * some 400 MB of heap at 4096) decides. Counters saturate at 255 and then stay there (a
 * permanent "maybe"). A table that cannot place an address within HS_SAMPLED_SET_MAX_PROBE
 * slots switches the set to "overflowed": from then on every free that passes the alignment
 * test is reported (the daemon ignores frees it does not know), so no free of a sampled block is
 * ever lost.
 *
 * Custom heaps (heap_api.c) use the set with keys of their own (any value): the alignment test
 * is the glibc heap's only; the filter and the table take any key.
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

/* The alignment of every block the client samples in the glibc heap (a power of two). 1 KiB:
 * 1 in 64 of glibc's 16-byte aligned blocks shares it, and memalign's leading gap (half of it
 * on average) goes back to glibc's free lists. */
#define HS_SAMPLED_ALIGN_SHIFT 10
#define HS_SAMPLED_ALIGN (1u << HS_SAMPLED_ALIGN_SHIFT)

/* The first test of a glibc-heap free: false when p cannot be a sampled block (NULL passes). */
static inline bool hs_sampled_aligned(uint64_t key)
{
    return (key & (HS_SAMPLED_ALIGN - 1)) == 0;
}

extern uint8_t hs_sampled_near[1u << HS_SAMPLED_SET_FILTER_BITS];
extern uint8_t hs_sampled_far[1u << HS_SAMPLED_SET_FILTER_BITS];
extern int hs_sampled_overflowed;

/* The address's HS_SAMPLED_ALIGN granule modulo the filter size (custom heaps' keys carry the
 * heap number in their top bits, which this ignores: the other index sees them). */
static inline uint32_t hs_sampled_near_index(uint64_t key)
{
    return (uint32_t)(key >> HS_SAMPLED_ALIGN_SHIFT) & ((1u << HS_SAMPLED_SET_FILTER_BITS) - 1);
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
