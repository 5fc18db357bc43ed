/* leak_report.h: leak_track's report of the allocations still live at exit. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_LEAK_REPORT_H
#define HEAPSCOPE_MALLOC_DEBUG_LEAK_REPORT_H

/* Logs the live tracked allocations, largest first, at most leak_track=N of them (Android's
 * lines):
 *   "+++ <program> leaked block of size <n> at 0x<ptr> (leak <i> of <count>)"
 * then "Backtrace at time of allocation:" and its frames when it has a backtrace, and
 *   "+++ <program>: <k> more leaked blocks not listed" when cut.
 * When blocks share a stack or the list is cut, a summary by allocation stack comes first:
 *   "+++ <program> leaked <count> blocks (<bytes> bytes) from <g> allocation stacks, most
 *    bytes first:", then per stack "+++ <k> blocks of size <n> (<bytes> bytes), stack <i> of
 *    <g>:" (or "of sizes <min> to <max>") with its backtrace, at most N stacks, then
 *   "+++ <program>: the [first N of the] <count> leaked blocks one by one, largest first:".
 * Runs at exit; allocations other threads make meanwhile are not included. */
void hs_md_leak_report(void);

#endif
