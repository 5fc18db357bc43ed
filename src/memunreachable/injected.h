/* injected.h: the library's mode when it was dlopen'ed into a process started without
 * heapscope (heapscope_unreachable_injected_init, include/heapscope/memunreachable_injected.h).
 *
 * In that mode the checks use the glibc heap source (glibc_heap.h) instead of malloc debug's
 * tracking, and the text report says that there are no backtraces.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_INJECTED_MODE_H
#define HEAPSCOPE_MEMUNREACHABLE_INJECTED_MODE_H

#include <stdbool.h>
#include <stddef.h>

/* True once heapscope_unreachable_injected_init has succeeded. Any thread. */
bool hs_mu_injected(void);

/* In this mode the library's log lines are kept for the command, not written to the
 * program's stderr: reset before a check, read after it (whole lines, "<body>\n" each). */
void hs_mu_injected_log_reset(void);
const char *hs_mu_injected_log(size_t *len);

/* glibc is recent enough for the walk of its heap (glibc_heap.h: 2.32 and later). */
bool hs_mu_glibc_walkable(void);

/* Runs a check and writes its report for `heapscope leaks -p` (memunreachable.c). */
void heapscope_unreachable_check(void);

#endif
