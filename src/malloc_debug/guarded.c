/* guarded.c: the shim's entry into guarded memory (see guarded.h). */
#include "guarded.h"

#include "guard_fault.h"
#include "guard_report.h"
#include "libc_malloc.h"
#include "log.h"
#include "report.h"

/* The fault handler is re-checked (two rt_sigaction calls) every this many guarded blocks,
 * page_guard's or sample_guard's: a program that replaced it behind the interposed sigaction
 * (the raw system call, sysv_signal) gets it back. With sample_guard the first block checks
 * too, so that a program's early replacement is caught at the first sample. */
#define HS_MD_HANDLER_CHECK_INTERVAL 1024
#define HS_MD_SAMPLED_CHECK_INTERVAL 16

static size_t g_allocs; /* guarded blocks handed out (atomic), for the handler check */

void hs_md_guarded_init(const struct hs_md_config *cfg)
{
    const char *prog = hs_log_program_name();
    if (cfg->options & HS_OPT_PAGE_GUARD) {
        hs_md.page_guard = hs_md_page_guard_init(cfg);
        if (!hs_md.page_guard)
            hs_log("%s: page_guard: the address space could not be reserved; page_guard is off",
                   prog);
    } else if (cfg->options & HS_OPT_SAMPLE_GUARD) {
        hs_md.sample_guard = hs_md_sample_guard_init(cfg);
        if (!hs_md.sample_guard)
            hs_log("%s: sample_guard: the pool could not be reserved; sample_guard is off", prog);
    }
    hs_md.guarded = hs_md.page_guard || hs_md.sample_guard;
    if (hs_md.guarded && !hs_md_guard_fault_init())
        hs_log("%s: %s: the SIGSEGV handler could not be installed; faults in guarded memory "
               "are not explained",
               prog, hs_md.page_guard ? "page_guard" : "sample_guard");
}

void *hs_md_guarded_alloc(size_t size, size_t align, size_t align_offset, bool zero, bool sample,
                          struct hs_md_bt *alloc_bt)
{
    void *p = NULL;
    if (hs_md.page_guard)
        p = hs_md_page_guard_alloc(size, align, align_offset, alloc_bt);
    else if (sample && hs_md.sample_guard)
        p = hs_md_sample_guard_alloc(size, align, align_offset, zero, alloc_bt);
    size_t interval =
        hs_md.page_guard ? HS_MD_HANDLER_CHECK_INTERVAL : HS_MD_SAMPLED_CHECK_INTERVAL;
    if (p && __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED) % interval == 0)
        hs_md_guard_fault_check_installed();
    return p;
}

/* The record of the area holding a, or NULL. */
static struct hs_md_gblock *record_of(uintptr_t a)
{
    if (hs_md_page_guard_owns(a))
        return hs_md_page_guard_record(a);
    if (hs_md_sample_guard_owns(a))
        return hs_md_sample_guard_record(a);
    return NULL;
}

void *hs_md_guarded_track_slot(uintptr_t p)
{
    struct hs_md_gblock *g = record_of(p);
    return g ? g->track_record : NULL;
}

void hs_md_guarded_set_user(void *block, const void *user, size_t size)
{
    struct hs_md_gblock *g = record_of((uintptr_t)block);
    if (!g)
        return;
    hs_md_gb_set_user(g, (uintptr_t)user);
    g->size = size;
}

bool hs_md_guarded_live_page(uintptr_t a)
{
    struct hs_md_gblock *g = record_of(a);
    return g && __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) == HS_MD_GB_LIVE &&
           a >= hs_md_gb_data(g) && a < hs_md_gb_data_end(g);
}

static bool freed_state(int state)
{
    return state == HS_MD_GB_FREED || state == HS_MD_GB_RETIRED;
}

int hs_md_guarded_check_owned(void *ptr, const char *function, bool claim,
                              struct hs_md_gblock **out)
{
    uintptr_t p = (uintptr_t)ptr;
    struct hs_md_gblock *g = record_of(p);
    int state = g ? __atomic_load_n(&g->state, __ATOMIC_ACQUIRE) : HS_MD_GB_EMPTY;
    if (state == HS_MD_GB_LIVE && hs_md_gb_user(g) == p) {
        if (!claim || __atomic_compare_exchange_n(&g->state, &state, HS_MD_GB_FREEING, false,
                                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            *out = g;
            return HS_MD_GUARDED_LIVE;
        }
        /* Another thread freed it between the load and the claim: state holds what it is. */
    }
    if (state == HS_MD_GB_FREEING && hs_md_gb_user(g) == p &&
        (hs_md.cfg.options & HS_OPT_FREE_TRACK))
        return HS_MD_GUARDED_QUEUED;
    if (state == HS_MD_GB_EMPTY || p < hs_md_gb_data(g) || p >= hs_md_gb_data_end(g)) {
        hs_md_report_pointer_error(ptr, "UNKNOWN POINTER", function, NULL);
        return HS_MD_GUARDED_REPORTED;
    }
    hs_md_guard_report_pointer(ptr, function, g, freed_state(state) || state == HS_MD_GB_FREEING);
    return HS_MD_GUARDED_REPORTED;
}

void hs_md_guarded_unclaim(struct hs_md_gblock *g)
{
    if (g)
        __atomic_store_n(&g->state, HS_MD_GB_LIVE, __ATOMIC_RELEASE);
}

void hs_md_guarded_release(struct hs_md_gblock *g, struct hs_md_bt *free_bt)
{
    hs_md_bt_ref(free_bt);
    if (hs_md_page_guard_owns(hs_md_gb_data(g)))
        hs_md_page_guard_free(g, free_bt);
    else
        hs_md_sample_guard_free(g, free_bt);
}

void hs_md_backing_free(void *orig, struct hs_md_bt *free_bt)
{
    /* Every free_track eviction comes here: without guarded memory, no record to look up. */
    if (!hs_md_guarded_owns((uintptr_t)orig)) {
        __libc_free(orig);
        return;
    }
    struct hs_md_gblock *g = record_of((uintptr_t)orig);
    if (g)
        hs_md_guarded_release(g, free_bt);
    else
        __libc_free(orig);
}

size_t hs_md_backing_usable_size_owned(void *orig)
{
    struct hs_md_gblock *g = record_of((uintptr_t)orig);
    return g ? g->block_size : hs_md_libc_usable_size(orig);
}

size_t hs_md_guarded_nearby(uintptr_t a, struct hs_md_gblock **out)
{
    if (hs_md_page_guard_owns(a))
        return hs_md_page_guard_nearby(a, out);
    return hs_md_sample_guard_nearby(a, out);
}

void hs_md_guarded_lock(void)
{
    hs_md_guard_fault_lock();
    hs_md_page_guard_lock();
    hs_md_sample_guard_lock();
}

void hs_md_guarded_unlock(void)
{
    hs_md_sample_guard_unlock();
    hs_md_page_guard_unlock();
    hs_md_guard_fault_unlock();
}

void hs_md_guarded_log_stats(void)
{
    if (!hs_md.page_guard)
        return;
    size_t live, quarantined;
    hs_md_page_guard_stats(&live, &quarantined);
    hs_log("%s: page_guard: %zu live blocks on pages of their own, %zu bytes of freed blocks' "
           "pages in quarantine",
           hs_log_program_name(), live, quarantined);
}
