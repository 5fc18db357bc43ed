/* embedded_shim.c: libmemunreachable.so carries its own copy of malloc debug's allocation
 * tracking (see src/malloc_debug/embedding.h): without LIBC_DEBUG_MALLOC_OPTIONS it tracks
 * every allocation from the first one (verify_pointers) and answers SIGRTMAX-16
 * (check_unreachable_on_signal), so a program linked with -lmemunreachable needs no setup. */
#include "embedding.h"

const struct hs_md_embedding hs_md_embedding = {true,
                                                "verify_pointers check_unreachable_on_signal"};
