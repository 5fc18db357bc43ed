/* report.c: framing and backtraces of malloc debug's error reports (see report.h). */
#include "report.h"

#include "backtrace.h"
#include "backtrace_table.h"
#include "capture.h"
#include "debug_state.h"
#include "log.h"
#include "signal_trampoline.h"
#include "suppress.h"

#include <stdlib.h>

#define HS_MD_FAILURE_FRAMES 64

/* Set while this thread's open report is suppressed (error: rules): not logged, no abort. */
static __thread int t_suppressed __attribute__((tls_model("initial-exec")));

/* Whether the report about to begin is suppressed: its failure backtrace (captured here, as
 * hs_md_report_end_with_backtrace will) against the error: rules. A report made in a signal
 * handler (a fault on a guard page: the program cannot go on past it) is never suppressed:
 * a silent crash would be worse than the report. */
static bool error_suppressed(void)
{
    if (!hs_md_suppressions_have(HS_SUPP_ERROR))
        return false;
    uintptr_t frames[HS_MD_FAILURE_FRAMES];
    size_t n = hs_md_capture(frames, HS_MD_FAILURE_FRAMES);
    for (size_t i = 0; i < n; i++)
        if (hs_is_signal_trampoline(frames[i]) || hs_is_signal_trampoline(frames[i] + 1))
            return false;
    return hs_md_suppressed(HS_SUPP_ERROR, frames, n, NULL, 0) != NULL;
}

void hs_md_report_begin(void)
{
    /* From here on the heap may be corrupted: nothing of ours allocates from glibc again
     * (the elfutils name fallback would, see symbols_loader.h). */
    __atomic_store_n(&hs_md.heap_suspect, 1, __ATOMIC_RELAXED);
    hs_backtrace_set_name_fallback(NULL);
    hs_md_in_shim++;
    bool suppressed = error_suppressed();
    hs_log_begin();
    if (suppressed && !t_suppressed) {
        t_suppressed = 1;
        hs_log_drop_report();
    }
    hs_log(HS_MD_LOG_DIVIDER);
}

void hs_md_report_close(void)
{
    hs_log(HS_MD_LOG_DIVIDER);
    hs_log_end();
    t_suppressed = 0;
    hs_md_in_shim--;
}

void hs_md_report_end(void)
{
    bool suppressed = t_suppressed;
    t_suppressed = 0;
    hs_md_report_close();
    if ((hs_md.cfg.options & HS_OPT_ABORT_ON_ERROR) && !suppressed)
        abort();
}

void hs_md_report_end_with_backtrace(void)
{
    hs_md_report_end_with_backtraces(NULL);
}

void hs_md_report_end_with_backtraces(const struct hs_md_bt *alloc_bt)
{
    uintptr_t frames[HS_MD_FAILURE_FRAMES];
    size_t n = hs_md_capture(frames, HS_MD_FAILURE_FRAMES);
    if (n == 0) {
        hs_log("  Backtrace failed to get any frames.");
    } else {
        hs_log("Backtrace at time of failure:");
        hs_backtrace_log(frames, n);
    }
    if (alloc_bt && alloc_bt->num_frames) {
        hs_log("Backtrace at time of allocation:");
        hs_backtrace_log(alloc_bt->frames, alloc_bt->num_frames);
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

void hs_md_note_out_of_memory(void)
{
    static int noted;
    if (__atomic_exchange_n(&noted, 1, __ATOMIC_RELAXED))
        return;
    hs_log("%s: malloc debug ran out of memory for its own tables: allocations it cannot track "
           "fail with ENOMEM, backtraces it cannot store are left out",
           hs_log_program_name());
}
