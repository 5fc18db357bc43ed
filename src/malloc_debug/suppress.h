/* suppress.h: the malloc debug option suppressions=FILE (rules: src/common/suppressions.h).
 *
 * Without the heapscope command, the shim applies the rules itself: error:PATTERN to its
 * error reports (the failure backtrace), leak:PATTERN to leak_track's blocks (the allocation
 * backtrace). It has no line tables, so a PATTERN is matched against each frame's function
 * and library path only, as the frame lines print them (the command also matches source
 * files). A suppressed error is not logged and does not abort (abort_on_error); suppressed
 * leaks are left out of leak_track's report and its counts. At exit one line per rule used
 * says how many findings it suppressed.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SUPPRESS_H
#define HEAPSCOPE_MALLOC_DEBUG_SUPPRESS_H

#include "suppressions.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_backtrace_printer;

/* Reads cfg.suppressions (at configure; the arena holds the rules). A file that cannot be
 * read or parsed is logged ("suppressions file FILE:LINE: ...") and no rule is used. */
void hs_md_suppressions_load(void);

/* Whether any rule of this kind was loaded (cheap: for the paths that would capture). */
bool hs_md_suppressions_have(enum hs_supp_kind kind);

/* The rule of this kind that matches the frames, counted with bytes; NULL when none.
 * printer may be NULL (one-off resolution). Async-signal-safe with printer NULL. */
struct hs_supp_rule *hs_md_suppressed(enum hs_supp_kind kind, const uintptr_t *frames, size_t n,
                                      struct hs_backtrace_printer *printer, uint64_t bytes);

/* Logs "suppressed N KINDs with KIND:PATTERN (FILE:LINE)" for each rule used. */
void hs_md_suppressions_summary(void);

#endif
