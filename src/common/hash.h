/* hash.h: the hashes the tools share (stack deduplication, grouping by backtrace, hash
 * tables). */
#ifndef HEAPSCOPE_COMMON_HASH_H
#define HEAPSCOPE_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit hash of a stack's frames, mixing every bit of every pc into all bits of the
 * result (callers use both the top and the low bits). */
static inline uint64_t hs_hash_frames(const uintptr_t *frames, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

/* A 64-bit finalizer (MurmurHash3's fmix64): every input bit changes every output bit with
 * probability about 1/2, so any bits of the result can index a table. */
static inline uint64_t hs_hash_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

#endif
