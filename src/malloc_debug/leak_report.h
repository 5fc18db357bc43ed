/* leak_report.h: leak_track's report of the allocations still live at exit. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_LEAK_REPORT_H
#define HEAPSCOPE_MALLOC_DEBUG_LEAK_REPORT_H

/* Logs every live tracked allocation, largest first:
 *   "+++ <program> leaked block of size <n> at 0x<ptr> (leak <i> of <count>)"
 * then "Backtrace at time of allocation:" and its frames when it has a backtrace.
 * Runs at exit; allocations other threads make meanwhile are not included. */
void hs_md_leak_report(void);

#endif
