/* guard_report.h: explaining an address in guarded memory, and the reports of page_guard and
 * sample_guard, in malloc debug's format (docs/malloc_debug.md, "Guarded memory").
 *
 * A fault report names the block nearest to the faulting address, the kind of error, the
 * access (read or write, when the kernel says), the byte as an index from the block's start
 * (allocation[N], negative before it, as the guard reports do) and its distance from the
 * block, then the stack of the access, the allocation stack and, for a freed block, the free
 * stack:
 *
 *   +++ ALLOCATION 0x7f1c0a7fef9c SIZE 100 HAS A BUFFER OVERFLOW
 *     write of allocation[100] at 0x7f1c0a7ff000: 1 byte past the end
 *   Backtrace at time of failure:
 *   Backtrace at time of allocation:
 *
 * Nothing here allocates; the fault report runs inside the signal handler.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARD_REPORT_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARD_REPORT_H

#include "guarded_block.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hs_md_guard_kind {
    HS_MD_GUARD_OVERFLOW,       /* past the end of the nearest block */
    HS_MD_GUARD_UNDERFLOW,      /* before its start */
    HS_MD_GUARD_USE_AFTER_FREE, /* in the pages of a freed block */
    HS_MD_GUARD_WILD,           /* no block near the address */
};

struct hs_md_guard_verdict {
    int kind;                     /* enum hs_md_guard_kind */
    const struct hs_md_gblock *g; /* the block (NULL for HS_MD_GUARD_WILD) */
    int state;                    /* its state when it was looked at */
};

/* What a fault at a means, from the records near it: a freed block whose pages hold a is a
 * use after free; otherwise the nearest block, live or freed, had an overflow (a past its
 * end) or an underflow (a before its start). Lock-free. */
void hs_md_guard_explain(uintptr_t a, struct hs_md_guard_verdict *v);

/* Access kinds for hs_md_guard_report_fault (fault_context.h's values). */
#define HS_MD_GUARD_ACCESS_UNKNOWN (-1)
#define HS_MD_GUARD_ACCESS_READ 0
#define HS_MD_GUARD_ACCESS_WRITE 1

/* The whole report of a fault at a: frames are the faulting access's stack (frame 0 the exact
 * pc). `note`, when not NULL, is logged last (what happens next). Does not abort. */
void hs_md_guard_report_fault(uintptr_t a, int access, const struct hs_md_guard_verdict *v,
                              const uintptr_t *frames, size_t n, const char *note);

/* The report of a bad pointer given to `function` that lies in the block g: a freed block's
 * own pointer (DOUBLE FREE for free, else USED AFTER FREE) or a pointer inside a block that
 * is not its start (INVALID FREE for free, else INVALID POINTER). Then the stack of the call,
 * the allocation and (freed) the free stacks. */
void hs_md_guard_report_pointer(const void *ptr, const char *function, const struct hs_md_gblock *g,
                                bool freed);

/* The CORRUPTED REAR GUARD report of a block whose slack (the bytes between its end and its
 * guard page) changed, one line per changed byte. */
void hs_md_guard_report_slack(const struct hs_md_gblock *g, uint8_t expected);

#endif
