/* report.c: framing and backtraces of malloc debug's error reports (see report.h). */
#include "report.h"

#include "backtrace.h"
#include "backtrace_table.h"
#include "capture.h"
#include "debug_state.h"
#include "log.h"

#include <stdlib.h>

#define HS_MD_FAILURE_FRAMES 64

void hs_md_report_begin(void)
{
    /* From here on the heap may be corrupted: nothing of ours allocates from glibc again
     * (the elfutils name fallback would, see symbols_loader.h). */
    __atomic_store_n(&hs_md.heap_suspect, 1, __ATOMIC_RELAXED);
    hs_backtrace_set_name_fallback(NULL);
    hs_md_in_shim++;
    hs_log_begin();
    hs_log(HS_MD_LOG_DIVIDER);
}

void hs_md_report_close(void)
{
    hs_log(HS_MD_LOG_DIVIDER);
    hs_log_end();
    hs_md_in_shim--;
}

void hs_md_report_end(void)
{
    hs_md_report_close();
    if (hs_md.cfg.options & HS_OPT_ABORT_ON_ERROR)
        abort();
}

void hs_md_report_end_with_backtrace(void)
{
    uintptr_t frames[HS_MD_FAILURE_FRAMES];
    size_t n = hs_md_capture(frames, HS_MD_FAILURE_FRAMES);
    if (n == 0) {
        hs_log("  Backtrace failed to get any frames.");
    } else {
        hs_log("Backtrace at time of failure:");
        hs_backtrace_log(frames, n);
    }
    hs_md_report_end();
}

void hs_md_report_pointer_error(const void *ptr, const char *error, const char *function,
                                const struct hs_md_bt *free_bt)
{
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p %s (%s)", ptr, error, function);
    if (free_bt) {
        hs_log("Backtrace of original free:");
        hs_backtrace_log(free_bt->frames, free_bt->num_frames);
    }
    hs_md_report_end_with_backtrace();
}

void hs_md_report_invalid_tag(const void *ptr, uint32_t tag, const char *function)
{
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p HAS INVALID TAG %x (%s)", ptr, tag, function);
    hs_md_report_end_with_backtrace();
}
