/* leak_report.c: the leak_track report at exit (see leak_report.h).
 *
 * A program that never frees lists hundreds of thousands of blocks, mostly from a few call
 * paths. So when the per-block list would repeat a stack or be cut, a summary comes first:
 * one entry per distinct allocation stack (the backtrace table already shares one record per
 * stack, so a stack is a record pointer), most bytes first. Then Android's per-block lines,
 * largest first, at most leak_track=N of them. Frames are printed through one
 * hs_backtrace_printer, so each distinct frame is resolved once for the whole report.
 */
#include "leak_report.h"

#include "backtrace.h"
#include "backtrace_table.h"
#include "debug_state.h"
#include "log.h"
#include "pointer_table.h"
#include "sort.h"
#include "suppress.h"
#include "symbols_loader.h"

struct leak {
    uintptr_t ptr;
    size_t size;
    struct hs_md_bt *bt; /* a reference, or NULL */
};

/* The leaks that share one allocation stack. */
struct stack_group {
    const struct hs_md_bt *bt;
    size_t count, bytes, min_size, max_size;
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

/* Indices into the leaks (ctx) ordered by stack record. */
static int by_stack(const void *a, const void *b, void *ctx)
{
    const struct leak *leaks = ctx;
    uintptr_t x = (uintptr_t)leaks[*(const size_t *)a].bt;
    uintptr_t y = (uintptr_t)leaks[*(const size_t *)b].bt;
    return x < y ? -1 : x > y;
}

/* Most bytes first, then most blocks, then the first frame (stable across runs). */
static int by_bytes_desc(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct stack_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    uintptr_t fx = x->bt->frames[0], fy = y->bt->frames[0];
    return fx < fy ? -1 : fx > fy;
}

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

/* Groups the leaks that have a backtrace by stack into *groups (arena memory, *cap entries);
 * returns how many groups, or SIZE_MAX when memory runs out. */
static size_t group_by_stack(const struct leak *leaks, size_t count, struct stack_group **groups,
                             size_t *cap)
{
    size_t with_bt = 0;
    for (size_t i = 0; i < count; i++)
        with_bt += leaks[i].bt != NULL;
    size_t *order = hs_arena_alloc(&hs_md_arena, (with_bt ? with_bt : 1) * sizeof(size_t));
    *cap = with_bt ? with_bt : 1;
    *groups = hs_arena_alloc(&hs_md_arena, *cap * sizeof(struct stack_group));
    if (!order || !*groups) {
        hs_arena_free(&hs_md_arena, order, *cap * sizeof(size_t));
        hs_arena_free(&hs_md_arena, *groups, *cap * sizeof(struct stack_group));
        *groups = NULL;
        return SIZE_MAX;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (leaks[i].bt)
            order[n++] = i;
    hs_sort(order, n, sizeof(size_t), by_stack, (void *)leaks);
    size_t num_groups = 0;
    for (size_t i = 0; i < n; i++) {
        const struct leak *l = &leaks[order[i]];
        if (num_groups == 0 || (*groups)[num_groups - 1].bt != l->bt)
            (*groups)[num_groups++] = (struct stack_group){l->bt, 0, 0, l->size, l->size};
        struct stack_group *g = &(*groups)[num_groups - 1];
        g->count++;
        g->bytes += l->size;
        if (l->size < g->min_size)
            g->min_size = l->size;
        if (l->size > g->max_size)
            g->max_size = l->size;
    }
    hs_arena_free(&hs_md_arena, order, *cap * sizeof(size_t));
    hs_sort(*groups, num_groups, sizeof(struct stack_group), by_bytes_desc, NULL);
    return num_groups;
}

static void log_summary(const char *prog, const struct leak *leaks, size_t count,
                        const struct stack_group *groups, size_t num_groups, size_t list_max,
                        struct hs_backtrace_printer *printer)
{
    size_t bytes = 0, no_bt_count = 0, no_bt_bytes = 0;
    for (size_t i = 0; i < count; i++) {
        bytes += leaks[i].size;
        if (!leaks[i].bt) {
            no_bt_count++;
            no_bt_bytes += leaks[i].size;
        }
    }
    hs_log("+++ %s leaked %zu block%s (%zu bytes) from %zu allocation stack%s, most bytes first:",
           prog, count, plural(count), bytes, num_groups, plural(num_groups));
    size_t shown = num_groups < list_max ? num_groups : list_max;
    for (size_t i = 0; i < shown; i++) {
        const struct stack_group *g = &groups[i];
        if (g->min_size == g->max_size)
            hs_log("+++ %zu block%s of size %zu (%zu bytes), stack %zu of %zu:", g->count,
                   plural(g->count), g->min_size, g->bytes, i + 1, num_groups);
        else
            hs_log("+++ %zu blocks of sizes %zu to %zu (%zu bytes), stack %zu of %zu:", g->count,
                   g->min_size, g->max_size, g->bytes, i + 1, num_groups);
        hs_log("Backtrace at time of allocation:");
        hs_backtrace_printer_log(printer, g->bt->frames, g->bt->num_frames);
    }
    if (shown < num_groups) {
        size_t rest_count = 0, rest_bytes = 0;
        for (size_t i = shown; i < num_groups; i++) {
            rest_count += groups[i].count;
            rest_bytes += groups[i].bytes;
        }
        hs_log("+++ %zu more stack%s (%zu block%s, %zu bytes) not listed", num_groups - shown,
               plural(num_groups - shown), rest_count, plural(rest_count), rest_bytes);
    }
    if (no_bt_count)
        hs_log("+++ %zu block%s (%zu bytes) without a backtrace", no_bt_count, plural(no_bt_count),
               no_bt_bytes);
    if (count > list_max)
        hs_log("+++ %s: the first %zu of the %zu leaked blocks one by one, largest first "
               "(leak_track=N lists N):",
               prog, list_max, count);
    else
        hs_log("+++ %s: the %zu leaked blocks one by one, largest first:", prog, count);
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

    size_t list_max = hs_md.cfg.leak_track_list_max;
    struct stack_group *groups = NULL;
    size_t groups_cap = 0, num_groups = 0, with_bt = 0;
    for (size_t i = 0; i < c.count; i++)
        with_bt += c.leaks[i].bt != NULL;

    /* Only now (the leaks are taken) may elfutils allocate: its blocks are not leaks. */
    if (with_bt)
        hs_md_symbols_load();
    struct hs_backtrace_printer *printer = with_bt ? hs_backtrace_printer_new(&hs_md_arena) : NULL;
    /* Suppressed leaks (leak: rules) leave the report before anything is counted, so that
     * its counts and stacks are those of the leaks that remain. */
    if (with_bt && hs_md_suppressions_have(HS_SUPP_LEAK)) {
        size_t kept = 0;
        for (size_t i = 0; i < c.count; i++) {
            struct leak *l = &c.leaks[i];
            if (l->bt && hs_md_suppressed(HS_SUPP_LEAK, l->bt->frames, l->bt->num_frames,
                                          printer, l->size)) {
                hs_md_bt_release(l->bt);
                continue;
            }
            c.leaks[kept++] = *l;
        }
        c.count = kept;
        with_bt = 0;
        for (size_t i = 0; i < c.count; i++)
            with_bt += c.leaks[i].bt != NULL;
    }
    if (with_bt)
        num_groups = group_by_stack(c.leaks, c.count, &groups, &groups_cap);
    /* The summary says something only when stacks repeat or the list is cut. */
    bool summary = num_groups != SIZE_MAX && num_groups > 0 &&
                   (num_groups < with_bt || c.count > list_max);

    const char *prog = hs_log_program_name();
    hs_log_begin();
    if (summary)
        log_summary(prog, c.leaks, c.count, groups, num_groups, list_max, printer);
    size_t listed = c.count < list_max ? c.count : list_max;
    for (size_t i = 0; i < listed; i++) {
        const struct leak *l = &c.leaks[i];
        hs_log("+++ %s leaked block of size %zu at 0x%lx (leak %zu of %zu)", prog, l->size,
               (unsigned long)l->ptr, i + 1, c.count);
        if (l->bt) {
            hs_log("Backtrace at time of allocation:");
            if (printer)
                hs_backtrace_printer_log(printer, l->bt->frames, l->bt->num_frames);
            else
                hs_backtrace_log(l->bt->frames, l->bt->num_frames);
        }
    }
    if (listed < c.count)
        hs_log("+++ %s: %zu more leaked block%s not listed", prog, c.count - listed,
               plural(c.count - listed));
    hs_log_end();

    hs_backtrace_printer_free(printer);
    for (size_t i = 0; i < c.count; i++)
        hs_md_bt_release(c.leaks[i].bt);
    hs_arena_free(&hs_md_arena, groups, groups_cap * sizeof(struct stack_group));
    hs_arena_free(&hs_md_arena, c.leaks, capacity * sizeof(struct leak));
    hs_md_in_shim--;
}
