/* pprof_out.c: a report profile as a gzipped pprof profile (see outputs.h), so that heap
 * dumps from malloc debug open in pprof tools too. */
#include "outputs.h"

#include "pprof.h"
#include "proc_maps.h"

#include <stdlib.h>
#include <string.h>

struct mapping_ctx {
    struct hs_pprof *pp;
    struct hs_rep_profile *p;
    struct {
        uintptr_t start, end;
        uint64_t id;
    } * ranges;
    size_t n, cap;
};

/* The build id the symbolizer found for a file (a location in it carries it). */
static const char *build_id_of(const struct hs_rep_profile *p, const char *path)
{
    for (size_t i = 0; i < p->num_locations; i++)
        if (p->locations[i].build_id[0] && strcmp(p->locations[i].map, path) == 0)
            return p->locations[i].build_id;
    return "";
}

static int add_mapping(const struct hs_map *m, void *arg)
{
    struct mapping_ctx *c = arg;
    if (m->path[0] != '/' || !(m->perms & HS_MAP_EXEC))
        return 0;
    uint64_t id =
        hs_pprof_mapping(c->pp, m->start, m->end, m->offset, m->path, build_id_of(c->p, m->path));
    /* Symbolized here, inlined frames included: pprof tools must not symbolize again. */
    hs_pprof_mapping_set_flags(c->pp, id, true, true, true, true);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->ranges = realloc(c->ranges, c->cap * sizeof(*c->ranges));
        if (!c->ranges)
            return 1;
    }
    c->ranges[c->n].start = m->start;
    c->ranges[c->n].end = m->end;
    c->ranges[c->n].id = id;
    c->n++;
    return 0;
}

static uint64_t mapping_of(const struct mapping_ctx *c, uint64_t pc)
{
    for (size_t i = 0; i < c->n; i++)
        if (pc >= c->ranges[i].start && pc < c->ranges[i].end)
            return c->ranges[i].id;
    return 0;
}

int hs_rep_write_pprof(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o)
{
    (void)o;
    struct hs_pprof *pp = hs_pprof_new();
    if (!pp)
        return -1;
    /* The names pprof tools know for heap profiles; the allocated pair only when known. */
    static const struct {
        int value;
        const char *type, *unit;
    } types[] = {
        {HS_FG_ALLOC_COUNT, "alloc_objects", "count"},
        {HS_FG_ALLOC_BYTES, "alloc_space", "bytes"},
        {HS_FG_INUSE_COUNT, "inuse_objects", "count"},
        {HS_FG_INUSE_BYTES, "inuse_space", "bytes"},
    };
    int used[4];
    size_t num_types = 0;
    for (size_t t = 0; t < 4; t++) {
        if (!p->has_alloc &&
            (types[t].value == HS_FG_ALLOC_COUNT || types[t].value == HS_FG_ALLOC_BYTES))
            continue;
        hs_pprof_add_sample_type(pp, types[t].type, types[t].unit);
        used[num_types++] = types[t].value;
    }
    hs_pprof_set_default_sample_type(pp, "inuse_space");
    hs_pprof_add_comment(pp, p->diff ? "heapscope report: difference against a base profile"
                                     : "heapscope report");

    struct mapping_ctx mc = {pp, p, NULL, 0, 0};
    if (p->maps) {
        struct hs_map scratch;
        struct hs_maps_parser parser;
        hs_maps_parser_init(&parser, &scratch);
        if (hs_maps_parser_feed(&parser, p->maps, p->maps_len, add_mapping, &mc) == 0)
            hs_maps_parser_finish(&parser, add_mapping, &mc);
    }

    /* Locations: one per distinct location, with its inlined lines (innermost first). */
    uint64_t *loc_ids = calloc(p->num_locations ? p->num_locations : 1, sizeof(*loc_ids));
    struct hs_pprof_line lines[64];
    for (size_t i = 0; loc_ids && i < p->num_locations; i++) {
        const struct hs_rep_location *l = &p->locations[i];
        size_t n = l->num_frames < 64 ? l->num_frames : 64;
        for (size_t f = 0; f < n; f++) {
            const struct hs_rep_frame *fr = &p->frames[l->first_frame + f];
            lines[f].function_id = hs_pprof_function(pp, fr->function, fr->function, fr->file);
            lines[f].line = fr->line;
        }
        loc_ids[i] = hs_pprof_location(pp, mapping_of(&mc, l->pc), l->pc, lines, n);
    }

    uint64_t *ids = NULL;
    size_t ids_cap = 0;
    int rc = loc_ids ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < p->num_stacks; i++) {
        const struct hs_rep_stack *st = &p->stacks[i];
        if (st->depth > ids_cap) {
            ids_cap = st->depth * 2;
            ids = realloc(ids, ids_cap * sizeof(*ids));
            if (!ids) {
                rc = -1;
                break;
            }
        }
        for (size_t l = 0; l < st->depth; l++)
            ids[l] = loc_ids[st->locations[l]];
        int64_t values[4];
        for (size_t t = 0; t < num_types; t++)
            values[t] = st->values[used[t]] - (p->diff ? st->base[used[t]] : 0);
        hs_pprof_add_sample(pp, ids, st->depth, values);
    }
    if (rc == 0)
        rc = hs_pprof_write(pp, out, true);
    free(ids);
    free(loc_ids);
    free(mc.ranges);
    hs_pprof_free(pp);
    return rc;
}
