/* shim_stubs.c: what init.c defines in the shim, for unit tests that compile some of the
 * shim's modules without the rest: the global state (tests set hs_md.cfg and hs_md.mode
 * themselves), the private arena, the re-entry guard, and an hs_md_init that only reports
 * the mode the test set. */
#include "debug_state.h"

struct hs_md_state hs_md;
struct hs_arena hs_md_arena;
__thread int hs_md_in_shim __attribute__((tls_model("initial-exec")));

int hs_md_init(void)
{
    return hs_md_mode_now();
}
