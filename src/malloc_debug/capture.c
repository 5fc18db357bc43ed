/* capture.c: backtrace capture without the shim's own frames (see capture.h). */
#include "capture.h"

#include "backtrace.h"
#include "debug_state.h"

/* Frames the shim itself can have on the stack above the program's: entry point, debug
 * call, allocation helper, tracking, report. Captured on top of `max` and trimmed. */
#define SHIM_FRAMES_MAX 6

size_t hs_md_capture(uintptr_t *frames, size_t max)
{
    if (max == 0)
        return 0;
    uintptr_t tmp[HS_BACKTRACE_MAX_FRAMES + SHIM_FRAMES_MAX];
    size_t want = max + SHIM_FRAMES_MAX;
    if (want > HS_BACKTRACE_MAX_FRAMES)
        want = HS_BACKTRACE_MAX_FRAMES;
    size_t n = hs_backtrace_capture(tmp, want, 0);
    size_t skip = 0;
    while (skip < n && tmp[skip] >= hs_md.self_start && tmp[skip] < hs_md.self_end)
        skip++;
    size_t out = 0;
    for (size_t i = skip; i < n && out < max; i++)
        frames[out++] = tmp[i];
    return out;
}
