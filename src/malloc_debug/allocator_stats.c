/* allocator_stats.c: the allocator statistics report (see allocator_stats.h). */
#include "allocator_stats.h"

#include "backtrace_table.h"
#include "debug_state.h"
#include "guarded.h"
#include "log.h"
#include "pointer_table.h"

#include <malloc.h>

void hs_md_log_allocator_stats(void)
{
    /* mallinfo2 walks glibc's arenas under their locks; it does not allocate. */
    struct mallinfo2 mi = mallinfo2();
    const char *prog = hs_log_program_name();
    hs_log_begin();
    hs_log("%s: glibc heap: %zu bytes in use, %zu bytes free, %zu bytes in %zu mmapped blocks, "
           "%zu bytes from the system (main arena)",
           prog, mi.uordblks + mi.hblkhd, mi.fordblks, mi.hblkhd, mi.hblks, mi.arena);
    if (hs_md.track)
        hs_log("%s: malloc debug: %zu live allocations tracked (peak %zu), %zu distinct "
               "backtraces, %zu bytes of own memory",
               prog, hs_md_ptr_count(), hs_md_ptr_peak(), hs_md_bt_count(),
               hs_arena_mapped_bytes(&hs_md_arena));
    hs_md_guarded_log_stats();
    hs_log_end();
}
