/* guard_report.c: what an address in guarded memory means, and the reports (guard_report.h). */
#include "guard_report.h"

#include "backtrace.h"
#include "capture.h"
#include "format.h"
#include "guard.h"
#include "guarded.h"
#include "log.h"
#include "report.h"

#define HS_MD_FAILURE_FRAMES 64

static bool freed_state(int state)
{
    return state == HS_MD_GB_FREED || state == HS_MD_GB_RETIRED;
}

/* Distance from a to the block's bytes: 0 inside, n for the n-th byte past the end or before
 * the start. */
static size_t distance(const struct hs_md_gblock *g, uintptr_t a)
{
    if (a < hs_md_gb_user(g))
        return hs_md_gb_user(g) - a;
    if (a - hs_md_gb_user(g) >= g->size)
        return a - (hs_md_gb_user(g) + g->size) + 1;
    return 0;
}

void hs_md_guard_explain(uintptr_t a, struct hs_md_guard_verdict *v)
{
    struct hs_md_gblock *near[3];
    size_t n = hs_md_guarded_nearby(a, near);
    v->kind = HS_MD_GUARD_WILD;
    v->g = NULL;
    v->state = HS_MD_GB_EMPTY;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct hs_md_gblock *g = near[i];
        int state = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
        if (state == HS_MD_GB_EMPTY)
            continue;
        if (freed_state(state) && a >= hs_md_gb_data(g) && a < hs_md_gb_data_end(g)) {
            /* The page was the freed block's own. */
            v->kind = HS_MD_GUARD_USE_AFTER_FREE;
            v->g = g;
            v->state = state;
            return;
        }
        size_t d = distance(g, a);
        if (d < best) {
            best = d;
            v->g = g;
            v->state = state;
        }
    }
    if (v->g)
        v->kind = a < hs_md_gb_user(v->g)                 ? HS_MD_GUARD_UNDERFLOW
                  : a - hs_md_gb_user(v->g) >= v->g->size ? HS_MD_GUARD_OVERFLOW
                                                          : HS_MD_GUARD_USE_AFTER_FREE;
}

/* Where byte `index` of a block of `size` bytes is, in words. */
static void where(char *out, size_t cap, long index, size_t size, bool freed)
{
    const char *of = freed ? " of the freed block" : "";
    if (index < 0) {
        unsigned long n = (unsigned long)-index;
        hs_format(out, cap, "%lu byte%s before the start%s", n, n == 1 ? "" : "s", of);
    } else if ((size_t)index >= size) {
        size_t n = (size_t)index - size + 1;
        hs_format(out, cap, "%zu byte%s past the end%s", n, n == 1 ? "" : "s", of);
    } else {
        hs_format(out, cap, "inside the %sblock", freed ? "freed " : "");
    }
}

/* Logs the allocation and (freed) free backtraces of g. */
static void log_block_backtraces(const struct hs_md_gblock *g, bool freed)
{
    const struct hs_md_bt *alloc_bt = g->alloc_bt, *free_bt = g->free_bt;
    if (alloc_bt) {
        hs_log("Backtrace at time of allocation:");
        hs_backtrace_log(alloc_bt->frames, alloc_bt->num_frames);
    }
    if (freed && free_bt) {
        hs_log("Backtrace at time of free:");
        hs_backtrace_log(free_bt->frames, free_bt->num_frames);
    }
}

static void log_failure(const uintptr_t *frames, size_t n)
{
    if (n == 0) {
        hs_log("  Backtrace failed to get any frames.");
        return;
    }
    hs_log("Backtrace at time of failure:");
    hs_backtrace_log(frames, n);
}

void hs_md_guard_report_fault(uintptr_t a, int access, const struct hs_md_guard_verdict *v,
                              const uintptr_t *frames, size_t n, const char *note)
{
    static const char *const kinds[] = {"HAS A BUFFER OVERFLOW", "HAS A BUFFER UNDERFLOW",
                                        "USED AFTER FREE"};
    const char *verb = access == HS_MD_GUARD_ACCESS_WRITE  ? "write"
                       : access == HS_MD_GUARD_ACCESS_READ ? "read"
                                                           : "access";
    hs_md_report_begin();
    const struct hs_md_gblock *g = v->g;
    bool freed = g && freed_state(v->state);
    if (g) {
        char pos[128];
        long index = (long)(a - hs_md_gb_user(g));
        where(pos, sizeof(pos), index, g->size, freed);
        hs_log("+++ ALLOCATION %p SIZE %zu %s", (void *)hs_md_gb_user(g), g->size, kinds[v->kind]);
        hs_log("  %s of allocation[%ld] at %p: %s", verb, index, (void *)a, pos);
    } else {
        hs_log("+++ ADDRESS %p IS GUARDED MEMORY OUTSIDE ANY ALLOCATION", (void *)a);
        hs_log("  %s at %p", verb, (void *)a);
    }
    log_failure(frames, n);
    if (g)
        log_block_backtraces(g, freed);
    if (note)
        hs_log("%s", note);
    hs_md_report_close();
}

void hs_md_guard_report_pointer(const void *ptr, const char *function, const struct hs_md_gblock *g,
                                bool freed)
{
    uintptr_t frames[HS_MD_FAILURE_FRAMES];
    size_t n = hs_md_capture(frames, HS_MD_FAILURE_FRAMES);
    bool is_free = function[0] == 'f'; /* "free" */
    uintptr_t p = (uintptr_t)ptr;
    hs_md_report_begin();
    if (p == hs_md_gb_user(g)) {
        hs_log("+++ ALLOCATION %p SIZE %zu %s (%s)", (void *)hs_md_gb_user(g), g->size,
               is_free ? "DOUBLE FREE" : "USED AFTER FREE", function);
    } else {
        char pos[128];
        long index = (long)(p - hs_md_gb_user(g));
        where(pos, sizeof(pos), index, g->size, freed);
        hs_log("+++ ALLOCATION %p SIZE %zu %s (%s)", (void *)hs_md_gb_user(g), g->size,
               is_free ? "INVALID FREE" : "INVALID POINTER", function);
        hs_log("  %s of allocation[%ld] at %p: %s", function, index, ptr, pos);
    }
    log_failure(frames, n);
    log_block_backtraces(g, freed);
    hs_md_report_end();
}

void hs_md_guard_report_slack(const struct hs_md_gblock *g, uint8_t expected)
{
    const uint8_t *end = (const uint8_t *)(hs_md_gb_block(g) + g->block_size);
    hs_md_report_corrupted_guard((const uint8_t *)hs_md_gb_user(g), g->size, "REAR", end,
                                 hs_md_gb_data_end(g) - (uintptr_t)end, expected, g->alloc_bt);
}
