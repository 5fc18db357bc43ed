/* report.h: the error reports malloc debug logs, in Android's exact wording.
 *
 * Every report is framed by the divider line and ends with the backtrace at the time of
 * failure; with abort_on_error the process aborts after the report. Reports never
 * allocate (format.c + log.c + a libunwind capture into a stack array).
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_REPORT_H
#define HEAPSCOPE_MALLOC_DEBUG_REPORT_H

#include <stdint.h>

#define HS_MD_LOG_DIVIDER "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***"

/* Opens a report: takes the log's report lock and logs the divider. */
void hs_md_report_begin(void);

/* Logs the closing divider and releases the lock; aborts with abort_on_error. */
void hs_md_report_end(void);

/* The same without the abort (the fault handler decides what follows its report). */
void hs_md_report_close(void);

/* Logs "Backtrace at time of failure:" and the caller's frames (the shim's own frames are
 * left out), then ends the report as hs_md_report_end. */
void hs_md_report_end_with_backtrace(void);

struct hs_md_bt;
/* The same, then "Backtrace at time of allocation:" and alloc_bt's frames when alloc_bt has
 * any (heapscope's addition to Android's corrupted-guard report: the block's own stack, as
 * a sanitizer names where the overflowed block was allocated). */
void hs_md_report_end_with_backtraces(const struct hs_md_bt *alloc_bt);

struct hs_md_bt;

/* The whole report for a bad pointer given to `function`:
 * "+++ ALLOCATION %p <error> (<function>)", then "Backtrace of original free:" when free_bt
 * is not NULL (free_track knew the block), then the failure backtrace. */
void hs_md_report_pointer_error(const void *ptr, const char *error, const char *function,
                                const struct hs_md_bt *free_bt);

/* The same for an invalid header tag: "+++ ALLOCATION %p HAS INVALID TAG %x (<function>)". */
void hs_md_report_invalid_tag(const void *ptr, uint32_t tag, const char *function);

/* Says once per process that the shim's own tables ran out of memory (the arena could not
 * map more): from then on an allocation the pointer table cannot record fails with ENOMEM,
 * and a backtrace that cannot be stored is left out. Never a false report. */
void hs_md_note_out_of_memory(void);

#endif
