/* leak_grouping.c: see leak_grouping.h.
 *
 * Working set: one struct UnreachableLeak per group (the representative, with the merged
 * "similar" sums), and a hash table (hash_table.h, in the arena) of group indices keyed by
 * the backtrace; groups are then ordered through an array of sort keys (total size, address,
 * group index), not by moving the 300-byte records.
 */
#include "leak_grouping.h"

#include "hash.h"
#include "hash_table.h"
#include "sort.h"

#include <errno.h>
#include <string.h>
#include <sys/types.h>

static size_t sat_add(size_t a, size_t b)
{
    return a + b < a ? SIZE_MAX : a + b;
}

/* Leaks of one group: the same backtrace, or (no frames, grouping by size) the same size. */
static bool same_group(const struct UnreachableLeak *a, const struct UnreachableLeak *b)
{
    if (a->num_backtrace_frames == 0 && b->num_backtrace_frames == 0)
        return a->size == b->size;
    return a->num_backtrace_frames == b->num_backtrace_frames &&
           memcmp(a->backtrace_frames, b->backtrace_frames,
                  a->num_backtrace_frames * sizeof(uintptr_t)) == 0;
}

static uint64_t group_hash(const struct UnreachableLeak *g)
{
    if (g->num_backtrace_frames == 0)
        return hs_hash_mix64(g->size);
    return hs_hash_frames(g->backtrace_frames, g->num_backtrace_frames);
}

/* The group table holds indices into the groups array (its ctx); UINT32_MAX: empty. */
static uint64_t group_key_hash(const struct UnreachableLeak *g, const void *ctx)
{
    (void)ctx;
    return group_hash(g);
}
static uint64_t group_entry_hash(const uint32_t *i, const void *ctx)
{
    return group_hash(&((const struct UnreachableLeak *)ctx)[*i]);
}
static bool group_matches(const uint32_t *i, const struct UnreachableLeak *g, const void *ctx)
{
    return same_group(&((const struct UnreachableLeak *)ctx)[*i], g);
}
static bool group_is_empty(const uint32_t *i)
{
    return *i == UINT32_MAX;
}
static void group_clear(uint32_t *i)
{
    *i = UINT32_MAX;
}

HS_HASH_TABLE_DEFINE(group_table, uint32_t, struct UnreachableLeak, group_key_hash,
                     group_entry_hash, group_matches, group_is_empty, group_clear)

/* What the sort compares, kept next to each other (sorting indices into the 300-byte records
 * would miss the cache on every comparison). */
struct sort_key {
    size_t total_size;
    uintptr_t begin;
    uint32_t group;
};

static int by_total_size(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    const struct sort_key *a = pa, *b = pb;
    if (a->total_size != b->total_size)
        return a->total_size > b->total_size ? -1 : 1;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    return 0;
}

int hs_mu_leak_grouping_run(const struct hs_mu_heap_walker *w, const struct hs_mu_folding *folding,
                            const struct hs_mu_heap_source *heap, size_t limit,
                            struct hs_arena *arena, struct hs_mu_grouping *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = folding->num_leaks;
    size_t groups_bytes = (n ? n : 1) * sizeof(struct UnreachableLeak);
    struct UnreachableLeak *groups = hs_arena_alloc(arena, groups_bytes);
    struct sort_key *order = hs_arena_alloc(arena, (n ? n : 1) * sizeof(*order));
    const struct hs_table_alloc in_arena = {hs_arena_table_alloc, hs_arena_table_free, arena};
    struct group_table table;
    group_table_init(&table, &in_arena, groups, 50);
    int r = 0;
    /* Room for every leak up front: the loop below cannot fail. */
    if (!groups || !order || !group_table_reserve(&table, n)) {
        r = -ENOMEM;
        goto done;
    }
    bool by_size = heap && heap->group_by_size;

    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        const struct hs_mu_folded_leak *f = &folding->leaks[i];
        const struct hs_mu_alloc *a = &w->allocs[f->alloc];
        struct UnreachableLeak *g = &groups[ng];
        memset(g, 0, sizeof(*g));
        g->begin = a->begin;
        g->size = a->end - a->begin;
        g->referenced_count = f->referenced_count;
        g->referenced_size = f->referenced_size;
        if (heap && heap->backtrace) {
            ssize_t nf = heap->backtrace((void *)a->begin, g->backtrace_frames,
                                         UNREACHABLE_BACKTRACE_FRAMES);
            if (nf > 0)
                g->num_backtrace_frames = (size_t)nf < UNREACHABLE_BACKTRACE_FRAMES
                                              ? (size_t)nf
                                              : UNREACHABLE_BACKTRACE_FRAMES;
        }
        if (g->num_backtrace_frames > 0 || by_size) {
            const uint32_t *found = group_table_find(&table, g);
            if (found) {
                struct UnreachableLeak *rep = &groups[*found];
                rep->similar_count++;
                rep->similar_size = sat_add(rep->similar_size, g->size);
                rep->similar_referenced_count =
                    sat_add(rep->similar_referenced_count, g->referenced_count);
                rep->similar_referenced_size =
                    sat_add(rep->similar_referenced_size, g->referenced_size);
                continue;
            }
            group_table_put(&table, &(uint32_t){(uint32_t)ng});
        }
        ng++;
    }
    for (size_t i = 0; i < ng; i++) {
        struct UnreachableLeak *g = &groups[i];
        g->total_size = sat_add(sat_add(g->size, g->referenced_size),
                                sat_add(g->similar_size, g->similar_referenced_size));
        order[i].total_size = g->total_size;
        order[i].begin = g->begin;
        order[i].group = (uint32_t)i;
    }
    hs_sort(order, ng, sizeof(*order), by_total_size, NULL);

    out->num_groups = ng;
    size_t keep = ng < limit ? ng : limit;
    if (keep > 0) {
        out->leaks = hs_arena_alloc(arena, keep * sizeof(*out->leaks));
        if (!out->leaks) {
            r = -ENOMEM;
            goto done;
        }
    }
    for (size_t i = 0; i < keep; i++) {
        struct UnreachableLeak *l = &out->leaks[i];
        *l = groups[order[i].group];
        l->contents_length =
            l->size < UNREACHABLE_CONTENTS_LENGTH ? l->size : UNREACHABLE_CONTENTS_LENGTH;
        hs_mu_read_guarded(l->contents, l->begin, l->contents_length);
    }
    out->num_leaks = keep;

done:
    hs_arena_free(arena, groups, groups_bytes);
    group_table_destroy(&table);
    hs_arena_free(arena, order, (n ? n : 1) * sizeof(*order));
    return r;
}

void hs_mu_leak_grouping_free(struct hs_mu_grouping *g, struct hs_arena *arena)
{
    if (g->leaks)
        hs_arena_free(arena, g->leaks, g->num_leaks * sizeof(*g->leaks));
    memset(g, 0, sizeof(*g));
}
