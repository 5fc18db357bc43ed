/* allocator_stats.h: log_allocator_stats_on_signal / _on_exit: glibc's heap statistics
 * (mallinfo2) and the shim's own bookkeeping, logged as a few lines. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_ALLOCATOR_STATS_H
#define HEAPSCOPE_MALLOC_DEBUG_ALLOCATOR_STATS_H

void hs_md_log_allocator_stats(void);

#endif
