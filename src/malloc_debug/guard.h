/* guard.h: checking the front and rear guards of an allocation.
 *
 * Called on free and realloc. A corrupted guard is reported with one line per bad byte
 * (index relative to the user pointer: negative in the front guard) and the allocation is
 * still freed, as on Android.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARD_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARD_H

#include "backtrace_table.h"
#include "byte_check.h"
#include "header.h"

#include <stdbool.h>

/* The report of a corrupted guard of the block at user (size bytes): the guard's n bytes at
 * `guard`, each changed one listed with its index from user; then the failure backtrace and,
 * when the block's allocation backtrace alloc_bt is known (the backtrace option), that one.
 * Also used for the slack of page_guard and sample_guard blocks (guard_report.h). */
void hs_md_report_corrupted_guard(const uint8_t *user, size_t size, const char *which,
                                  const uint8_t *guard, size_t n, uint8_t expected,
                                  const struct hs_md_bt *alloc_bt);

/* The out-of-line part of hs_md_guards_check, once a guard was found corrupted: checks
 * each guard again and reports each corrupted one. Returns true when intact. */
bool hs_md_guards_report(const struct hs_md_header *h, const struct hs_md_bt *alloc_bt);

/* Checks whichever guards are on; reports each corrupted one. alloc_bt: the block's
 * allocation backtrace when the caller has it (free took the block's entry out of the
 * pointer table), else NULL: a report then looks the block up. Returns true when intact.
 * Inline (every free and realloc checks): guards of 16 to 64 bytes cost a few loads. */
static inline __attribute__((always_inline)) bool
hs_md_guards_check(const struct hs_md_header *h, const struct hs_md_bt *alloc_bt)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    const uint8_t *user = hs_md_user_of(h);
    bool ok = true;
    if (cfg->options & HS_OPT_FRONT_GUARD)
        ok = hs_md_all_equal(user - cfg->front_guard_bytes, cfg->front_guard_bytes,
                             cfg->front_guard_value);
    if (cfg->options & HS_OPT_REAR_GUARD)
        ok &= hs_md_all_equal(user + h->size, cfg->rear_guard_bytes, cfg->rear_guard_value);
    if (__builtin_expect(!ok, 0))
        return hs_md_guards_report(h, alloc_bt);
    return true;
}

#endif
