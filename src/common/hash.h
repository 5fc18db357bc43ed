/* hash.h: the hashes the tools share (stack deduplication, grouping by backtrace, hash
 * tables, strings and checksums). One of each: do not write another. */
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

/* FNV-1a 64 over len bytes, continuing from h (HS_HASH_BYTES_SEED to start): the bytes hash
 * of strings and of checksummed records. Byte at a time, so for keys of a few dozen bytes;
 * its low bits are weak, so a table indexes by its top bits or mixes it (hash_table.h does). */
#define HS_HASH_BYTES_SEED 0xcbf29ce484222325ull

static inline uint64_t hs_hash_bytes_from(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static inline uint64_t hs_hash_bytes(const void *data, size_t len)
{
    return hs_hash_bytes_from(HS_HASH_BYTES_SEED, data, len);
}

/* hs_hash_bytes of a NUL-terminated string, without its terminator. */
static inline uint64_t hs_hash_string(const char *s)
{
    uint64_t h = HS_HASH_BYTES_SEED;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif
