/* leak_report.c: the leak_track report at exit (see leak_report.h). */
#include "leak_report.h"

#include "backtrace.h"
#include "debug_state.h"
#include "log.h"
#include "pointer_table.h"
#include "sort.h"
#include "symbols_loader.h"

struct leak {
    uintptr_t ptr;
    size_t size;
    struct hs_md_bt *bt; /* a reference, or NULL */
};

struct collect {
    struct leak *leaks;
    size_t capacity, count;
};

static void collect_one(uintptr_t ptr, const struct hs_md_ptr_info *info, void *arg)
{
    struct collect *c = arg;
    if (c->count == c->capacity)
        return;
    hs_md_bt_ref(info->bt);
    c->leaks[c->count++] = (struct leak){ptr, info->size, info->bt};
}

/* Largest first; equal sizes by address so the order is stable from run to run. */
static int by_size_desc(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct leak *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

void hs_md_leak_report(void)
{
    hs_md_in_shim++;
    /* The table may still grow while other threads run: size the array with headroom and
     * take what fits. */
    size_t capacity = hs_md_ptr_count() + 1024;
    struct collect c = {hs_arena_alloc(&hs_md_arena, capacity * sizeof(struct leak)), capacity, 0};
    if (!c.leaks) {
        hs_log("%s: not enough memory to report leaks", hs_log_program_name());
        hs_md_in_shim--;
        return;
    }
    hs_md_ptr_lock_all();
    hs_md_ptr_foreach_locked(collect_one, &c);
    hs_md_ptr_unlock_all();
    hs_sort(c.leaks, c.count, sizeof(struct leak), by_size_desc, NULL);
    /* Only now (the leaks are taken) may elfutils allocate: its blocks are not leaks. */
    if (c.count > 0)
        hs_md_symbols_load();

    const char *prog = hs_log_program_name();
    hs_log_begin();
    for (size_t i = 0; i < c.count; i++) {
        const struct leak *l = &c.leaks[i];
        hs_log("+++ %s leaked block of size %zu at 0x%lx (leak %zu of %zu)", prog, l->size,
               (unsigned long)l->ptr, i + 1, c.count);
        if (l->bt) {
            hs_log("Backtrace at time of allocation:");
            hs_backtrace_log(l->bt->frames, l->bt->num_frames);
        }
        hs_md_bt_release(l->bt);
    }
    hs_log_end();
    hs_arena_free(&hs_md_arena, c.leaks, capacity * sizeof(struct leak));
    hs_md_in_shim--;
}
