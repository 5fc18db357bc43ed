/* pprof_out.c: a report profile as a gzipped pprof profile (see outputs.h), so that heap
 * dumps from malloc debug open in pprof tools too. */
#include "outputs.h"

#include "pprof.h"

#include <stdlib.h>
#include <string.h>

/* The pprof ids of the profile's mappings and locations, made when a sample first needs
 * them (a diff's base brings locations and mappings that no stack may use). */
struct ids {
    struct hs_pprof *pp;
    struct hs_rep_profile *p;
    uint64_t *mapping; /* per mapping, 0: not written yet */
    uint64_t *location;
};

static bool same_mapping(const struct hs_rep_mapping *a, const struct hs_rep_mapping *b)
{
    return a->start == b->start && a->limit == b->limit && a->offset == b->offset &&
           strcmp(a->path, b->path) == 0 && strcmp(a->build_id, b->build_id) == 0;
}

static uint64_t mapping_id(struct ids *c, size_t i)
{
    if (i == HS_REP_NO_MAPPING)
        return 0;
    if (c->mapping[i])
        return c->mapping[i];
    const struct hs_rep_mapping *m = &c->p->mappings[i];
    /* One file of one build at one address is one mapping, whichever input saw it (two
     * dumps of one run); without a build id nothing says the code is the same. */
    for (size_t j = 0; m->build_id[0] && j < c->p->num_mappings; j++)
        if (j != i && c->mapping[j] && same_mapping(m, &c->p->mappings[j]))
            return c->mapping[i] = c->mapping[j];
    uint64_t id = hs_pprof_add_mapping(c->pp, m->start, m->limit, m->offset, m->path, m->build_id);
    /* Symbolized here, inlined frames included: pprof tools must not symbolize again. */
    if (id)
        hs_pprof_mapping_set_flags(c->pp, id, true, true, true, true);
    return c->mapping[i] = id;
}

/* A location with its inlined lines, innermost first. */
static uint64_t location_id(struct ids *c, size_t i)
{
    if (c->location[i])
        return c->location[i];
    const struct hs_rep_location *l = &c->p->locations[i];
    struct hs_pprof_line lines[64];
    size_t n = l->num_frames < 64 ? l->num_frames : 64;
    for (size_t f = 0; f < n; f++) {
        const struct hs_rep_frame *fr = &c->p->frames[l->first_frame + f];
        lines[f].function_id = hs_pprof_function(c->pp, fr->function, fr->function, fr->file);
        lines[f].line = fr->line;
    }
    return c->location[i] = hs_pprof_location(c->pp, mapping_id(c, l->mapping), l->pc, lines, n);
}

int hs_rep_write_pprof(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o)
{
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
    const char *shown = "inuse_space";
    for (size_t t = 0; t < 4; t++) {
        if (!p->has_alloc &&
            (types[t].value == HS_FG_ALLOC_COUNT || types[t].value == HS_FG_ALLOC_BYTES))
            continue;
        hs_pprof_add_sample_type(pp, types[t].type, types[t].unit);
        used[num_types++] = types[t].value;
        if (types[t].value == o->value)
            shown = types[t].type;
    }
    /* What pprof shows first: the value --value asked for. */
    hs_pprof_set_default_sample_type(pp, shown);
    /* pprof merges only profiles of one period type: keep the inputs'. */
    if (p->period_type)
        hs_pprof_set_period(pp, p->period_type, p->period_unit, p->period);
    hs_pprof_add_comment(pp, p->diff ? "heapscope report: difference against a base profile"
                                     : "heapscope report");

    struct ids c = {pp, p, calloc(p->num_mappings + 1, sizeof(uint64_t)),
                    calloc(p->num_locations + 1, sizeof(uint64_t))};
    uint64_t *ids = NULL;
    size_t ids_cap = 0;
    int rc = c.mapping && c.location ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < p->num_stacks; i++) {
        const struct hs_rep_stack *st = &p->stacks[i];
        int64_t values[4];
        bool nonzero = false;
        for (size_t t = 0; t < num_types; t++) {
            values[t] = st->values[used[t]] - (p->diff ? st->base[used[t]] : 0);
            nonzero |= values[t] != 0;
        }
        if (!nonzero)
            continue; /* unchanged in a diff: nothing to show */
        if (st->depth > ids_cap) {
            ids_cap = st->depth * 2;
            ids = realloc(ids, ids_cap * sizeof(*ids));
            if (!ids) {
                rc = -1;
                break;
            }
        }
        for (size_t l = 0; l < st->depth; l++)
            ids[l] = location_id(&c, st->locations[l]);
        hs_pprof_add_sample(pp, ids, st->depth, values);
    }
    if (rc == 0)
        rc = hs_pprof_write(pp, out, true);
    free(ids);
    free(c.mapping);
    free(c.location);
    hs_pprof_free(pp);
    return rc;
}
