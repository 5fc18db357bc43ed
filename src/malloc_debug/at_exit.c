/* at_exit.c: what malloc debug does when the program exits.
 *
 * Runs as this library's destructor, after the program's own atexit handlers and
 * destructors: checks the free queue (free_track), reports leaks (leak_track), logs the
 * allocator statistics (log_allocator_stats_on_exit) and writes the exit heap dump
 * (backtrace_dump_on_exit). Other threads may still be
 * allocating; everything here takes the same locks they do, and the shim keeps working
 * afterwards.
 */
#include "allocator_stats.h"
#include "debug_state.h"
#include "free_queue.h"
#include "heap_dump.h"
#include "leak_report.h"
#include "record_allocs.h"
#include "suppress.h"

__attribute__((destructor)) static void hs_md_at_exit(void)
{
    if (hs_md_mode_now() != HS_MD_DEBUG)
        return;
    const uint32_t options = hs_md.cfg.options;
    if (options & HS_OPT_FREE_TRACK)
        hs_md_free_queue_verify_all();
    if (options & HS_OPT_LEAK_TRACK)
        hs_md_leak_report();
    hs_md_suppressions_summary();
    if (options & HS_OPT_LOG_ALLOCATOR_STATS_ON_EXIT)
        hs_md_log_allocator_stats();
    hs_md_heap_dump_at_exit();
    if (options & HS_OPT_RECORD_ALLOCS_ON_EXIT)
        hs_md_record_write_at_exit();
}
