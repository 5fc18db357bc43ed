/* guard.c: guard verification and the CORRUPTED GUARD report (see guard.h). */
#include "guard.h"

#include "byte_check.h"
#include "debug_state.h"
#include "log.h"
#include "pointer_table.h"
#include "report.h"

static bool bytes_all_equal(const uint8_t *p, size_t n, uint8_t v)
{
    return hs_md_first_mismatch(p, n, v) == n;
}

void hs_md_report_corrupted_guard(const uint8_t *user, size_t size, const char *which,
                                  const uint8_t *guard, size_t n, uint8_t expected,
                                  const struct hs_md_bt *alloc_bt)
{
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p SIZE %zu HAS A CORRUPTED %s GUARD", (void *)user, size, which);
    for (size_t i = 0; i < n; i++) {
        if (guard[i] != expected)
            hs_log("  allocation[%ld] = 0x%02x (expected 0x%02x)", (long)(guard + i - user),
                   guard[i], expected);
    }
    hs_md_report_end_with_backtraces(alloc_bt);
}

/* Reports a corrupted guard of h's block; its allocation backtrace is alloc_bt, or the
 * pointer table's entry for the block (a lookup on the error path only). */
static void report_corrupted(const struct hs_md_header *h, const struct hs_md_bt *alloc_bt,
                             const char *which, const uint8_t *guard, size_t n, uint8_t expected)
{
    struct hs_md_ptr_info info = {.size = 0};
    if (!alloc_bt && hs_md.track && hs_md_ptr_find_ref(hs_md_user_of(h), &info))
        alloc_bt = info.bt;
    hs_md_report_corrupted_guard(hs_md_user_of(h), h->size, which, guard, n, expected, alloc_bt);
    hs_md_bt_release(info.bt);
}

bool hs_md_guards_report(const struct hs_md_header *h, const struct hs_md_bt *alloc_bt)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    const uint8_t *user = hs_md_user_of(h);
    bool ok = true;
    if (cfg->options & HS_OPT_FRONT_GUARD) {
        const uint8_t *front = user - cfg->front_guard_bytes;
        if (!bytes_all_equal(front, cfg->front_guard_bytes, cfg->front_guard_value)) {
            report_corrupted(h, alloc_bt, "FRONT", front, cfg->front_guard_bytes, cfg->front_guard_value);
            ok = false;
        }
    }
    if (cfg->options & HS_OPT_REAR_GUARD) {
        const uint8_t *rear = user + h->size;
        if (!bytes_all_equal(rear, cfg->rear_guard_bytes, cfg->rear_guard_value)) {
            report_corrupted(h, alloc_bt, "REAR", rear, cfg->rear_guard_bytes, cfg->rear_guard_value);
            ok = false;
        }
    }
    return ok;
}
