/* report.c: framing and backtraces of malloc debug's error reports (see report.h). */
#include "report.h"

#include "backtrace.h"
#include "debug_state.h"
#include "log.h"

#include <stdlib.h>

#define HS_MD_FAILURE_FRAMES 64

void hs_md_report_begin(void)
{
    hs_md_in_shim++;
    hs_log_begin();
    hs_log(HS_MD_LOG_DIVIDER);
}

/* Captures the current stack without the shim's own frames at the top. */
static size_t capture_caller_frames(uintptr_t *frames, size_t max)
{
    size_t n = hs_backtrace_capture(frames, max, 0);
    size_t skip = 0;
    while (skip < n && frames[skip] >= hs_md.self_start && frames[skip] < hs_md.self_end)
        skip++;
    for (size_t i = skip; i < n; i++)
        frames[i - skip] = frames[i];
    return n - skip;
}

void hs_md_report_end_with_backtrace(void)
{
    uintptr_t frames[HS_MD_FAILURE_FRAMES];
    size_t n = capture_caller_frames(frames, HS_MD_FAILURE_FRAMES);
    if (n == 0) {
        hs_log("  Backtrace failed to get any frames.");
    } else {
        hs_log("Backtrace at time of failure:");
        hs_backtrace_log(frames, n);
    }
    hs_log(HS_MD_LOG_DIVIDER);
    hs_log_end();
    hs_md_in_shim--;
    if (hs_md.cfg.options & HS_OPT_ABORT_ON_ERROR)
        abort();
}

void hs_md_report_pointer_error(const void *ptr, const char *error, const char *function)
{
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p %s (%s)", ptr, error, function);
    hs_md_report_end_with_backtrace();
}

void hs_md_report_invalid_tag(const void *ptr, uint32_t tag, const char *function)
{
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p HAS INVALID TAG %x (%s)", ptr, tag, function);
    hs_md_report_end_with_backtrace();
}
