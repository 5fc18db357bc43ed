/* stack_gap.h: parts of a thread's stack that a sample's copy leaves out.
 *
 * A sample copies the stack from the stack pointer up (stack_copy.h). The unwinder reads only
 * a few words of each frame (the return address and the saved registers, near its top), so a
 * frame with big locals (a buffer of some KiB in main or in an event loop) is copied on every
 * sample and never read. The daemon notes, per thread, the largest parts its last complete
 * unwind did not read (stack_hints.h); the client leaves them out of its next copies, and says
 * which in the sample (records.h); the unwinder ends an unwind that needs a word of a part left
 * out as a truncated copy (unwinder.h), and the daemon then stops noting gaps for that thread.
 *
 * A gap is [off, off + len) in offsets from the sampled stack pointer, in the stack as it was
 * (the span), not in the copy: a copy with gaps holds the span's bytes minus the gaps', in
 * order.
 */
#ifndef HEAPSCOPE_PROFILER_STACK_GAP_H
#define HEAPSCOPE_PROFILER_STACK_GAP_H

#include <stdbool.h>
#include <stdint.h>

/* The most gaps of a sample. */
#define HS_STACK_GAPS 3u

/* The smallest gap worth noting: below it the saved copy does not pay for the risk of a
 * truncated sample when another call path reads there. */
#define HS_STACK_GAP_MIN 512u

struct hs_stack_gap {
    uint32_t off, len;
};

/* True when the n gaps lie in order inside a span of span bytes, each of at least 8 bytes and
 * 8-byte aligned, none at the very start (the innermost frame is always copied), and apart. */
static inline bool hs_stack_gaps_in_order(const struct hs_stack_gap *g, unsigned n, uint64_t span)
{
    uint64_t from = 8; /* the first word stays */
    for (unsigned i = 0; i < n; i++) {
        if (g[i].len < 8 || ((g[i].off | g[i].len) & 7) || g[i].off < from ||
            (uint64_t)g[i].off + g[i].len >= span)
            return false;
        from = (uint64_t)g[i].off + g[i].len + 8;
    }
    return true;
}

/* The same, and no more than a sample holds (HS_STACK_GAPS). */
static inline bool hs_stack_gaps_valid(const struct hs_stack_gap *g, unsigned n, uint64_t span)
{
    return n <= HS_STACK_GAPS && hs_stack_gaps_in_order(g, n, span);
}

/* The bytes of the gaps. */
static inline uint64_t hs_stack_gaps_bytes(const struct hs_stack_gap *g, unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += g[i].len;
    return sum;
}

#endif
