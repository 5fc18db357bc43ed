/* capture.h: stacks as the shim records them: the program's frames only.
 *
 * The shim's own frames (entry point, debug path, report) are dropped from the top by
 * address range, which works whatever the compiler inlined. The walk starts in the function
 * hs_md_capture is inlined into (its context), so the frames of the capture itself are never
 * walked, and the walker drops the shim's frames as it goes (hs_backtrace_capture_from).
 * The walk on cached rules alone is called from here, without the wrapper, and starts at the
 * call site in the caller (HS_CFI_GET_CALLER); a walk that needs more (a rule not cached yet,
 * libunwind, the fork gate) goes through hs_backtrace_capture_from, from this function.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H
#define HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H

#include "backtrace.h"
#include "capture_gate.h"
#include "cfi_unwind.h"
#include "debug_state.h"

#include <stddef.h>
#include <stdint.h>

/* Stores up to max frames of the calling thread, innermost program frame first. Inline so
 * that it adds no frame of its own to unwind, and so that the context is the caller's. */
static inline __attribute__((always_inline)) size_t hs_md_capture(uintptr_t *frames, size_t max)
{
    if (max == 0)
        return 0;
    if (max > HS_BACKTRACE_MAX_FRAMES)
        max = HS_BACKTRACE_MAX_FRAMES;
    /* hs_backtrace_capture_from's first try, made here: a stack whose rules are all cached
     * (nearly every one) costs the walker's call only, from this function's caller (its
     * frame pointer gives where the walk's first step would lead). Anything else goes the
     * whole way, from here. */
    if (__atomic_load_n(&hs_capture_gate.state, __ATOMIC_RELAXED) == HS_CAPTURE_GATE_OPEN) {
        struct hs_cfi_context caller;
        HS_CFI_GET_CALLER(&caller);
        size_t got = hs_cfi_capture_from_caller(&caller, frames, max, hs_md.self_start,
                                                hs_md.self_end);
        if (__builtin_expect(got != HS_CFI_FALLBACK, 1))
            return got;
    }
    struct hs_cfi_context here;
    HS_CFI_GET_CONTEXT(&here);
    return hs_backtrace_capture_from(&here, hs_md.self_start, hs_md.self_end, frames, max);
}

#endif
