/* byte_check.h: finding the first byte that differs from a fill value, 64 bytes at a time,
 * and the guards' short cases: an all-equal test and a fill for 16 to 64 bytes, inline.
 * Guards are written on every allocation and checked on every free, freed blocks on every
 * free_track eviction, so this is on the hot path of those options. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_BYTE_CHECK_H
#define HEAPSCOPE_MALLOC_DEBUG_BYTE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Index of the first of the n bytes at p that is not v, or n when all are v. */
static inline size_t hs_md_first_mismatch(const uint8_t *p, size_t n, uint8_t v)
{
    const uint64_t word = 0x0101010101010101ull * v;
    size_t i = 0;
    /* 64 bytes per step with 16-byte vectors (SSE2 on x86_64): a whole freed block is
     * checked on every free_track eviction. The step that finds a difference hands over to
     * the loops below, which find its byte. */
    typedef uint8_t v16 __attribute__((vector_size(16)));
    if (n >= 64) { /* guards (32 bytes by default) skip the set-up */
        v16 splat;
        memset(&splat, v, sizeof(splat));
        for (; i + 64 <= n; i += 64) {
            v16 a, b, c, d;
            memcpy(&a, p + i, 16);
            memcpy(&b, p + i + 16, 16);
            memcpy(&c, p + i + 32, 16);
            memcpy(&d, p + i + 48, 16);
            v16 x = ((a ^ splat) | (b ^ splat)) | ((c ^ splat) | (d ^ splat));
            uint64_t q[2];
            memcpy(q, &x, sizeof(q));
            if ((q[0] | q[1]) != 0)
                break;
        }
    }
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        if (((w[0] ^ word) | (w[1] ^ word) | (w[2] ^ word) | (w[3] ^ word)) != 0)
            break;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w != word)
            break;
    }
    for (; i < n; i++)
        if (p[i] != v)
            return i;
    return n;
}

typedef uint8_t hs_md_v16 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) hs_md_v16 hs_md_v16_splat(uint8_t v)
{
    hs_md_v16 s;
    memset(&s, v, sizeof(s));
    return s;
}

static inline __attribute__((always_inline)) hs_md_v16 hs_md_v16_load(const uint8_t *p)
{
    hs_md_v16 x;
    memcpy(&x, p, sizeof(x));
    return x;
}

/* The differences from splat of the 16-byte lines of [p, p + n), n > 64, ORed together:
 * 64 bytes a step into two accumulators, then the last 64 bytes (overlapping), no test
 * inside the loop (a difference is the rare case: the caller then asks
 * hs_md_first_mismatch where). aligned: p is 16-byte aligned, so that the loads fold into
 * the XORs. */
static inline __attribute__((always_inline)) hs_md_v16
hs_md_v16_diff_long(const uint8_t *p, size_t n, hs_md_v16 splat, bool aligned)
{
    if (aligned)
        p = __builtin_assume_aligned(p, 16);
    hs_md_v16 x = {0}, y = {0};
    size_t i = 0;
    for (; i + 64 < n; i += 64) {
        x |= (hs_md_v16_load(p + i) ^ splat) | (hs_md_v16_load(p + i + 16) ^ splat);
        y |= (hs_md_v16_load(p + i + 32) ^ splat) | (hs_md_v16_load(p + i + 48) ^ splat);
    }
    const uint8_t *t = p + n - 64;
    x |= (hs_md_v16_load(t) ^ splat) | (hs_md_v16_load(t + 16) ^ splat);
    y |= (hs_md_v16_load(t + 32) ^ splat) | (hs_md_v16_load(t + 48) ^ splat);
    return x | y;
}

/* True when the n (> 64) bytes at p are all v: a whole freed block on every free_track
 * eviction. */
static inline bool hs_md_all_equal_long(const uint8_t *p, size_t n, uint8_t v)
{
    hs_md_v16 splat = hs_md_v16_splat(v);
    hs_md_v16 x = ((uintptr_t)p & 15) == 0 ? hs_md_v16_diff_long(p, n, splat, true)
                                           : hs_md_v16_diff_long(p, n, splat, false);
    uint64_t q[2];
    memcpy(q, &x, sizeof(q));
    return (q[0] | q[1]) == 0;
}

/* True when the n bytes at p are all v. From 16 to 64 bytes (guards: 32 by default) two or
 * four overlapping 16-byte loads and one test, no loop; longer ones hs_md_all_equal_long,
 * shorter ones hs_md_first_mismatch. */
static inline __attribute__((always_inline)) bool hs_md_all_equal(const uint8_t *p, size_t n,
                                                                  uint8_t v)
{
    if (n > 64)
        return hs_md_all_equal_long(p, n, v);
    if (n < 16)
        return hs_md_first_mismatch(p, n, v) == n;
    hs_md_v16 splat = hs_md_v16_splat(v);
    /* [0, 16) and [n - 16, n) cover n <= 32; [16, 32) and [n - 32, n - 16) the rest. */
    hs_md_v16 x = (hs_md_v16_load(p) ^ splat) | (hs_md_v16_load(p + n - 16) ^ splat);
    if (n > 32)
        x |= (hs_md_v16_load(p + 16) ^ splat) | (hs_md_v16_load(p + n - 32) ^ splat);
    uint64_t q[2];
    memcpy(q, &x, sizeof(q));
    return (q[0] | q[1]) == 0;
}

/* memset(p, v, n), with the stores of 16 to 64 bytes inline (overlapping as above). */
static inline __attribute__((always_inline)) void hs_md_fill(uint8_t *p, size_t n, uint8_t v)
{
    if (n - 16 > 48) {
        memset(p, v, n);
        return;
    }
    hs_md_v16 splat = hs_md_v16_splat(v);
    memcpy(p, &splat, 16);
    memcpy(p + n - 16, &splat, 16);
    if (n > 32) {
        memcpy(p + 16, &splat, 16);
        memcpy(p + n - 32, &splat, 16);
    }
}

#endif
