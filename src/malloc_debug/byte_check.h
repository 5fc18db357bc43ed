/* byte_check.h: finding the first byte that differs from a fill value, 64 bytes at a time.
 * Guards are checked on every free and freed blocks on every free_track eviction, so this
 * is on the hot path of those options. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_BYTE_CHECK_H
#define HEAPSCOPE_MALLOC_DEBUG_BYTE_CHECK_H

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

#endif
