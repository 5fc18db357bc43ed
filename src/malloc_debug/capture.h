/* capture.h: stacks as the shim records them: the program's frames only.
 *
 * The shim's own frames (entry point, debug path, report) are dropped from the top by
 * address range, which works whatever the compiler inlined.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H
#define HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H

#include "backtrace.h"
#include "cfi_unwind.h"
#include "debug_state.h"

#include <stddef.h>
#include <stdint.h>

/* Frames the shim itself can have on the stack above the program's; captured on top of
 * `max` and trimmed. */
#define HS_MD_SHIM_FRAMES_MAX 6

/* Stores up to max frames of the calling thread, innermost program frame first. Inline so
 * that it adds no frame of its own to unwind. */
static inline __attribute__((always_inline)) size_t hs_md_capture(uintptr_t *frames, size_t max)
{
    if (max == 0)
        return 0;
    uintptr_t tmp[HS_BACKTRACE_MAX_FRAMES];
    size_t want = max + HS_MD_SHIM_FRAMES_MAX;
    if (want > HS_BACKTRACE_MAX_FRAMES)
        want = HS_BACKTRACE_MAX_FRAMES;
    /* The walk starts in the function this is inlined into: the shim frames above it
     * (hs_backtrace_capture's, the walker's) are not walked at all. */
    struct hs_cfi_context here;
    HS_CFI_GET_CONTEXT(&here);
    size_t n = hs_backtrace_capture_from(&here, tmp, want);
    size_t skip = 0;
    while (skip < n && tmp[skip] >= hs_md.self_start && tmp[skip] < hs_md.self_end)
        skip++;
    size_t out = 0;
    for (size_t i = skip; i < n && out < max; i++)
        frames[out++] = tmp[i];
    return out;
}

#endif
