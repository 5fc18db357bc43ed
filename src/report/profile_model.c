/* profile_model.c: building, symbolizing and diffing report profiles (see profile_model.h). */
#include "profile_model.h"

#include "hash.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "heap_dump_reader.h"
#include "pprof.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "symbolizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A string -> index map (hash_table.h); also interns strings (keys are owned). */
struct str_entry {
    char *key; /* NULL: empty slot */
    size_t val;
};
struct str_key {
    const char *s;
    size_t n;
};

static uint64_t str_key_hash(const struct str_key *k, const void *ctx)
{
    (void)ctx;
    return hs_hash_bytes(k->s, k->n);
}
static uint64_t str_entry_hash(const struct str_entry *e, const void *ctx)
{
    (void)ctx;
    return hs_hash_string(e->key);
}
static bool str_matches(const struct str_entry *e, const struct str_key *k, const void *ctx)
{
    (void)ctx;
    return strncmp(e->key, k->s, k->n) == 0 && e->key[k->n] == '\0';
}
static bool str_is_empty(const struct str_entry *e)
{
    return e->key == NULL;
}
static void str_clear(struct str_entry *e)
{
    e->key = NULL;
}

HS_HASH_TABLE_DEFINE(strmap, struct str_entry, struct str_key, str_key_hash, str_entry_hash,
                     str_matches, str_is_empty, str_clear)

/* Finds s; inserts it with value `val` when absent (returns the stored key in *key). */
static size_t strmap_get(struct strmap *m, const char *s, size_t n, size_t val, const char **key)
{
    bool inserted;
    struct str_entry *e = strmap_find_or_insert(m, &(struct str_key){s, n}, &inserted);
    if (!e)
        abort(); /* the report cannot go on without memory */
    if (inserted) {
        char *k = malloc(n + 1);
        if (!k)
            abort();
        memcpy(k, s, n);
        k[n] = '\0';
        *e = (struct str_entry){k, val};
    }
    if (key)
        *key = e->key;
    return e->val;
}

static void strmap_free(struct strmap *m)
{
    size_t pos = 0;
    for (struct str_entry *e; (e = strmap_next(m, &pos)) != NULL;)
        free(e->key);
    strmap_destroy(m);
}

struct impl {
    struct strmap strings;   /* interned strings */
    struct strmap stack_ids; /* symbolized stack key -> stack index */
    struct strmap labels;    /* frame label -> unused */
};

static struct impl *impl_of(struct hs_rep_profile *p)
{
    if (!p->impl) {
        struct impl *im = calloc(1, sizeof(struct impl));
        if (!im)
            abort();
        strmap_init(&im->strings, &hs_table_libc, NULL, 50);
        strmap_init(&im->stack_ids, &hs_table_libc, NULL, 50);
        strmap_init(&im->labels, &hs_table_libc, NULL, 50);
        p->impl = im;
    }
    return p->impl;
}

static const char *intern(struct hs_rep_profile *p, const char *s)
{
    const char *key;
    strmap_get(&impl_of(p)->strings, s, strlen(s), 0, &key);
    return key;
}

static void *grow(void *array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return array;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *a = realloc(array, c * elem);
    if (!a)
        abort();
    *cap = c;
    return a;
}

void hs_rep_profile_init(struct hs_rep_profile *p)
{
    memset(p, 0, sizeof(*p));
}

void hs_rep_profile_free(struct hs_rep_profile *p)
{
    for (size_t i = 0; i < p->num_stacks; i++)
        free(p->stacks[i].locations);
    free(p->stacks);
    free(p->frames);
    free(p->locations);
    free(p->mappings);
    struct impl *im = p->impl;
    if (im) {
        strmap_free(&im->strings);
        strmap_free(&im->stack_ids);
        strmap_free(&im->labels);
        free(im);
    }
    memset(p, 0, sizeof(*p));
}

/* Appends a mapping to p; returns its index. */
static size_t add_mapping(struct hs_rep_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                          const char *path, const char *build_id)
{
    p->mappings = grow(p->mappings, &p->cap_mappings, p->num_mappings + 1, sizeof(*p->mappings));
    p->mappings[p->num_mappings] = (struct hs_rep_mapping){start, limit, offset, intern(p, path),
                                                           intern(p, build_id ? build_id : "")};
    return p->num_mappings++;
}

/* Takes an input's period type: the first one wins, the largest period of it stays. */
static void merge_period(struct hs_rep_profile *p, const char *type, const char *unit,
                         int64_t period)
{
    if (!type[0] && !unit[0])
        return;
    if (!p->period_type) {
        p->period_type = intern(p, type);
        p->period_unit = intern(p, unit);
        p->period = period;
    } else if (strcmp(p->period_type, type) == 0 && strcmp(p->period_unit, unit) == 0 &&
               period > p->period) {
        p->period = period;
    }
}

/* Symbolizes pc into a new location of p, in the given mapping (or HS_REP_NO_MAPPING).
 * Frames of dumps and unsymbolized profiles are call sites (heapscope's since call sites were
 * stored, Android's, Go's) or return addresses (dumps of earlier heapscope versions), and the
 * file does not say which: both are looked up at pc - 1, which lies inside the call
 * instruction either way (an x86_64 call is at least 2 bytes long). The location keeps the pc
 * as the file has it. */
static size_t add_location(struct hs_rep_profile *p, struct hs_symbolizer *sym, uint64_t pc,
                           size_t mapping)
{
    struct hs_frame_info info[HS_SYMBOLIZE_MAX_FRAMES];
    size_t n = sym ? hs_symbolize(sym, (uintptr_t)pc, 1, info, HS_SYMBOLIZE_MAX_FRAMES) : 0;
    p->locations =
        grow(p->locations, &p->cap_locations, p->num_locations + 1, sizeof(*p->locations));
    p->frames = grow(p->frames, &p->cap_frames, p->num_frames + (n ? n : 1), sizeof(*p->frames));
    struct hs_rep_location *loc = &p->locations[p->num_locations];
    loc->pc = pc;
    loc->mapping = mapping;
    loc->first_frame = p->num_frames;
    loc->num_frames = n ? n : 1;
    loc->map = intern(p, n ? info[0].map_path : "");
    loc->rel_pc = n ? info[0].rel_pc : pc;
    loc->build_id = intern(p, n ? info[0].build_id : "");
    /* A dump's MAPS has no build ids: the file the symbolizer read gives it. */
    if (mapping != HS_REP_NO_MAPPING && !p->mappings[mapping].build_id[0] && loc->build_id[0] &&
        strcmp(loc->map, p->mappings[mapping].path) == 0)
        p->mappings[mapping].build_id = loc->build_id;
    if (n == 0) {
        char name[32];
        snprintf(name, sizeof(name), "0x%" PRIx64, pc);
        p->frames[p->num_frames++] = (struct hs_rep_frame){intern(p, name), "", 0, false};
    }
    for (size_t i = 0; i < n; i++) {
        const char *fn = info[i].demangled[0] ? info[i].demangled : info[i].function;
        char unknown[64];
        if (!fn[0]) {
            /* No symbol: name the place by its object and offset, as pprof does. */
            const char *base = strrchr(info[i].map_path, '/');
            snprintf(unknown, sizeof(unknown), "%s+0x%" PRIxPTR,
                     base ? base + 1 : (info[i].map_path[0] ? info[i].map_path : "?"),
                     info[i].rel_pc);
            fn = unknown;
        }
        p->frames[p->num_frames++] = (struct hs_rep_frame){intern(p, fn), intern(p, info[i].file),
                                                           info[i].line, info[i].inlined};
    }
    return p->num_locations++;
}

/* A source file as the report shows it: its name without the directory. */
static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The stack with these locations (keyed by what the report shows of them), created when new. */
static struct hs_rep_stack *stack_for(struct hs_rep_profile *p, const size_t *locs, size_t depth)
{
    /* Key: every frame's function, source file name and line, what a person reads: runs at
     * other addresses, and builds whose sources sat in other directories, match. */
    size_t cap = 256, len = 0;
    char *key = malloc(cap);
    for (size_t i = 0; key && i < depth; i++) {
        const struct hs_rep_location *l = &p->locations[locs[i]];
        for (size_t f = 0; f < l->num_frames; f++) {
            const struct hs_rep_frame *fr = &p->frames[l->first_frame + f];
            const char *file = file_name(fr->file);
            size_t need = strlen(fr->function) + strlen(file) + 16;
            if (len + need >= cap) {
                while (len + need >= cap)
                    cap *= 2;
                char *k = realloc(key, cap);
                if (!k) {
                    free(key);
                    key = NULL;
                    break;
                }
                key = k;
            }
            len += (size_t)sprintf(key + len, "%s\x01%s\x01%u\x02", fr->function, file, fr->line);
        }
    }
    if (!key)
        abort();
    struct impl *im = impl_of(p);
    size_t idx = strmap_get(&im->stack_ids, key, len, p->num_stacks, NULL);
    free(key);
    if (idx < p->num_stacks)
        return &p->stacks[idx];
    p->stacks = grow(p->stacks, &p->cap_stacks, p->num_stacks + 1, sizeof(*p->stacks));
    struct hs_rep_stack *st = &p->stacks[p->num_stacks++];
    memset(st, 0, sizeof(*st));
    st->locations = malloc((depth ? depth : 1) * sizeof(size_t));
    if (!st->locations)
        abort();
    memcpy(st->locations, locs, depth * sizeof(size_t));
    st->depth = depth;
    return st;
}

/* pc -> location index, per dump (the same pc means the same code only within one run). */
struct pc_entry {
    uint64_t key; /* pc + 1; 0: empty slot */
    size_t val;
};

static uint64_t pc_key_hash(const uint64_t *k, const void *ctx)
{
    (void)ctx;
    return *k;
}
static uint64_t pc_entry_hash(const struct pc_entry *e, const void *ctx)
{
    return pc_key_hash(&e->key, ctx);
}
static bool pc_matches(const struct pc_entry *e, const uint64_t *k, const void *ctx)
{
    (void)ctx;
    return e->key == *k;
}
static bool pc_is_empty(const struct pc_entry *e)
{
    return e->key == 0;
}
static void pc_clear(struct pc_entry *e)
{
    e->key = 0;
}

HS_HASH_TABLE_DEFINE(pcmap, struct pc_entry, uint64_t, pc_key_hash, pc_entry_hash, pc_matches,
                     pc_is_empty, pc_clear)

static size_t *pcmap_slot(struct pcmap *m, uint64_t pc, bool *found)
{
    uint64_t key = pc + 1;
    bool inserted;
    struct pc_entry *e = pcmap_find_or_insert(m, &key, &inserted);
    if (!e)
        abort();
    if (inserted)
        *e = (struct pc_entry){key, 0};
    *found = !inserted;
    return &e->val;
}

/* The executable file mappings of a dump's MAPS, appended to p. */
static int add_dump_mapping(const struct hs_map *m, void *arg)
{
    struct hs_rep_profile *p = arg;
    if (m->path[0] == '/' && (m->perms & HS_MAP_EXEC))
        add_mapping(p, m->start, m->end, m->offset, m->path, "");
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const struct hs_rep_mapping *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The mapping of mappings[first, last) (sorted by start) holding pc, or HS_REP_NO_MAPPING. */
static size_t mapping_of(const struct hs_rep_profile *p, size_t first, size_t last, uint64_t pc)
{
    if (first >= last)
        return HS_REP_NO_MAPPING; /* and p->mappings may be NULL */
    size_t i = hs_range_find(p->mappings + first, last - first, pc, start, limit);
    return i < last - first ? first + i : HS_REP_NO_MAPPING;
}

int hs_rep_add_dump(struct hs_rep_profile *p, const struct hs_dump *d,
                    const struct hs_rep_options *opt, char *err, size_t err_cap)
{
    struct hs_symbolizer *sym = hs_symbolizer_new(opt->symbols_dir);
    if (!sym) {
        snprintf(err, err_cap, "cannot set up the symbolizer");
        return -1;
    }
    hs_symbolizer_add_maps_text(sym, d->maps, d->maps_len);
    /* This dump's mappings, for pprof output: each location points at the one holding it. */
    size_t first_mapping = p->num_mappings;
    struct hs_map scratch;
    struct hs_maps_parser parser;
    hs_maps_parser_init(&parser, &scratch);
    if (hs_maps_parser_feed(&parser, d->maps, d->maps_len, add_dump_mapping, p) == 0)
        hs_maps_parser_finish(&parser, add_dump_mapping, p);
    if (p->num_mappings > first_mapping)
        qsort(p->mappings + first_mapping, p->num_mappings - first_mapping, sizeof(*p->mappings),
              by_start);
    /* A heap dump holds every allocation: nothing was sampled. */
    merge_period(p, "space", "bytes", 1);

    /* Count the distinct pcs first, for the progress line. */
    struct pcmap pcs;
    pcmap_init(&pcs, &hs_table_libc, NULL, 50);
    size_t distinct = 0, done = 0;
    for (size_t r = 0; r < d->num_records; r++)
        for (uint32_t f = 0; f < d->records[r].num_frames; f++) {
            bool found;
            pcmap_slot(&pcs, d->records[r].frames[f], &found);
            distinct += !found;
        }
    pcmap_clear(&pcs);
    bool tty = opt->progress && isatty(2);

    size_t *locs = NULL, locs_cap = 0;
    for (size_t r = 0; r < d->num_records; r++) {
        const struct hs_dump_record *rec = &d->records[r];
        locs = grow(locs, &locs_cap, rec->num_frames + 1, sizeof(*locs));
        for (uint32_t f = 0; f < rec->num_frames; f++) {
            bool found;
            size_t *slot = pcmap_slot(&pcs, rec->frames[f], &found);
            if (!found) {
                *slot = add_location(p, sym, rec->frames[f],
                                     mapping_of(p, first_mapping, p->num_mappings, rec->frames[f]));
                if (tty && (++done % 1000 == 0 || done == distinct))
                    fprintf(stderr, "\rheapscope report: symbolizing %zu/%zu addresses", done,
                            distinct);
            }
            locs[f] = *slot;
        }
        struct hs_rep_stack *st = stack_for(p, locs, rec->num_frames);
        int64_t bytes = (int64_t)(rec->size * rec->num), count = (int64_t)rec->num;
        st->values[HS_FG_INUSE_BYTES] += bytes;
        st->values[HS_FG_INUSE_COUNT] += count;
        p->totals[HS_FG_INUSE_BYTES] += bytes;
        p->totals[HS_FG_INUSE_COUNT] += count;
    }
    if (tty && distinct >= 1000)
        fprintf(stderr, "\n");
    else if (opt->progress && distinct >= 10000)
        fprintf(stderr, "heapscope report: symbolized %zu addresses\n", distinct);
    free(locs);
    pcmap_destroy(&pcs);
    hs_symbolizer_free(sym);
    return 0;
}

/* The report value a pprof sample type carries, or -1. */
static int value_of_type(struct hs_pprof_value_type t)
{
    static const struct {
        const char *type;
        int value;
    } known[] = {
        {"inuse_space", HS_FG_INUSE_BYTES},
        {"inuse_objects", HS_FG_INUSE_COUNT},
        {"alloc_space", HS_FG_ALLOC_BYTES},
        {"alloc_objects", HS_FG_ALLOC_COUNT},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(t.type, known[i].type) == 0)
            return known[i].value;
    return -1;
}

/* A location of the profile as a report location: its own lines when the profile is
 * symbolized, else symbolized here from its mapping's file (if the build ids agree). */
static size_t add_pprof_location(struct hs_rep_profile *p, const struct hs_pprof *pp,
                                 struct hs_pprof_location_view l, size_t first_mapping,
                                 struct hs_symbolizer *sym, bool *warned)
{
    size_t mi = l.mapping_id ? hs_pprof_mapping_index(pp, l.mapping_id) : HS_PPROF_NONE;
    struct hs_pprof_mapping_view m = {0};
    if (mi != HS_PPROF_NONE)
        m = hs_pprof_mapping_at(pp, mi);
    size_t mapping = mi != HS_PPROF_NONE ? first_mapping + mi : HS_REP_NO_MAPPING;
    if (l.num_lines == 0) {
        size_t idx = add_location(p, sym, l.address, mapping);
        struct hs_rep_location *loc = &p->locations[idx];
        if (m.build_id && m.build_id[0] && loc->build_id[0] &&
            strcmp(m.build_id, loc->build_id) != 0) {
            /* The local file is not the one profiled: its symbols would lie. */
            if (!*warned)
                fprintf(stderr,
                        "heapscope report: %s has build id %s, the profile says %s: "
                        "not using its symbols\n",
                        loc->map, loc->build_id, m.build_id);
            *warned = true;
            char name[64];
            snprintf(name, sizeof(name), "0x%" PRIx64, l.address);
            loc->num_frames = 1;
            p->frames[loc->first_frame] = (struct hs_rep_frame){intern(p, name), "", 0, false};
        }
        return idx;
    }
    p->locations =
        grow(p->locations, &p->cap_locations, p->num_locations + 1, sizeof(*p->locations));
    p->frames = grow(p->frames, &p->cap_frames, p->num_frames + l.num_lines, sizeof(*p->frames));
    struct hs_rep_location *loc = &p->locations[p->num_locations];
    loc->pc = l.address;
    loc->mapping = mapping;
    loc->map = intern(p, m.filename ? m.filename : "");
    loc->rel_pc = m.filename ? l.address - m.start + m.offset : l.address;
    loc->build_id = intern(p, m.build_id ? m.build_id : "");
    loc->first_frame = p->num_frames;
    loc->num_frames = l.num_lines;
    for (size_t i = 0; i < l.num_lines; i++) {
        size_t fi = l.lines[i].function_id ? hs_pprof_function_index(pp, l.lines[i].function_id)
                                           : HS_PPROF_NONE;
        struct hs_pprof_function_view f = {0};
        if (fi != HS_PPROF_NONE)
            f = hs_pprof_function_at(pp, fi);
        char unknown[32];
        const char *name = f.name && f.name[0] ? f.name : f.system_name;
        if (!name || !name[0]) {
            snprintf(unknown, sizeof(unknown), "0x%" PRIx64, l.address);
            name = unknown;
        }
        p->frames[p->num_frames++] = (struct hs_rep_frame){
            intern(p, name), intern(p, f.filename ? f.filename : ""),
            l.lines[i].line > 0 ? (unsigned)l.lines[i].line : 0, i + 1 < l.num_lines};
    }
    return p->num_locations++;
}

int hs_rep_add_pprof(struct hs_rep_profile *p, const struct hs_pprof *pp,
                     const struct hs_rep_options *opt, char *err, size_t err_cap)
{
    size_t num_types = hs_pprof_num_sample_types(pp);
    int map_type[64];
    bool any = false, alloc = false;
    for (size_t t = 0; t < num_types && t < 64; t++) {
        map_type[t] = value_of_type(hs_pprof_sample_type_at(pp, t));
        any |= map_type[t] >= 0;
        alloc |= map_type[t] == HS_FG_ALLOC_BYTES || map_type[t] == HS_FG_ALLOC_COUNT;
    }
    if (!any || num_types > 64) {
        snprintf(err, err_cap,
                 "not a heap profile: no sample type inuse_space, inuse_objects, "
                 "alloc_space or alloc_objects");
        return -1;
    }
    p->has_alloc = p->num_stacks == 0 ? alloc : (p->has_alloc && alloc);
    struct hs_pprof_value_type period = hs_pprof_period_type(pp);
    merge_period(p, period.type, period.unit, hs_pprof_period(pp));
    /* The profile's mappings, all of them: its locations point into them. */
    size_t first_mapping = p->num_mappings;
    for (size_t i = 0; i < hs_pprof_num_mappings(pp); i++) {
        struct hs_pprof_mapping_view m = hs_pprof_mapping_at(pp, i);
        add_mapping(p, m.start, m.limit, m.offset, m.filename, m.build_id);
    }

    /* Unsymbolized locations are symbolized here, from the mappings' files. */
    struct hs_symbolizer *sym = hs_symbolizer_new(opt->symbols_dir);
    for (size_t i = 0; sym && i < hs_pprof_num_mappings(pp); i++) {
        struct hs_pprof_mapping_view m = hs_pprof_mapping_at(pp, i);
        if (m.filename[0] == '/' && m.limit > m.start)
            hs_symbolizer_add_map(sym, m.start, m.limit, m.offset, m.filename);
    }
    size_t n = hs_pprof_num_locations(pp);
    size_t *loc_index = malloc((n ? n : 1) * sizeof(size_t));
    if (!loc_index)
        abort();
    bool warned = false;
    for (size_t i = 0; i < n; i++)
        loc_index[i] =
            add_pprof_location(p, pp, hs_pprof_location_at(pp, i), first_mapping, sym, &warned);

    size_t *locs = NULL, locs_cap = 0;
    for (size_t s = 0; s < hs_pprof_num_samples(pp); s++) {
        struct hs_pprof_sample_view sv = hs_pprof_sample_at(pp, s);
        locs = grow(locs, &locs_cap, sv.num_locations + 1, sizeof(*locs));
        for (size_t l = 0; l < sv.num_locations; l++)
            locs[l] = loc_index[hs_pprof_location_index(pp, sv.location_ids[l])];
        struct hs_rep_stack *st = stack_for(p, locs, sv.num_locations);
        for (size_t t = 0; t < sv.num_values && t < num_types; t++) {
            if (map_type[t] < 0)
                continue;
            st->values[map_type[t]] += sv.values[t];
            p->totals[map_type[t]] += sv.values[t];
        }
    }
    free(locs);
    free(loc_index);
    if (sym)
        hs_symbolizer_free(sym);
    return 0;
}

/* Copies a stack of `from` into p (by its names), returning p's stack. from's mapping i is
 * p's mapping first_mapping + i. */
static struct hs_rep_stack *import_stack(struct hs_rep_profile *p,
                                         const struct hs_rep_profile *from,
                                         const struct hs_rep_stack *st, size_t first_mapping)
{
    size_t *locs = malloc((st->depth ? st->depth : 1) * sizeof(size_t));
    if (!locs)
        abort();
    for (size_t i = 0; i < st->depth; i++) {
        const struct hs_rep_location *l = &from->locations[st->locations[i]];
        p->locations =
            grow(p->locations, &p->cap_locations, p->num_locations + 1, sizeof(*p->locations));
        p->frames =
            grow(p->frames, &p->cap_frames, p->num_frames + l->num_frames, sizeof(*p->frames));
        struct hs_rep_location *nl = &p->locations[p->num_locations];
        *nl = *l;
        if (l->mapping != HS_REP_NO_MAPPING)
            nl->mapping = first_mapping + l->mapping;
        nl->map = intern(p, l->map);
        nl->build_id = intern(p, l->build_id);
        nl->first_frame = p->num_frames;
        for (size_t f = 0; f < l->num_frames; f++) {
            struct hs_rep_frame fr = from->frames[l->first_frame + f];
            fr.function = intern(p, fr.function);
            fr.file = intern(p, fr.file);
            p->frames[p->num_frames++] = fr;
        }
        locs[i] = p->num_locations++;
    }
    struct hs_rep_stack *mine = stack_for(p, locs, st->depth);
    free(locs);
    return mine;
}

void hs_rep_diff(struct hs_rep_profile *p, const struct hs_rep_profile *base)
{
    size_t first_mapping = p->num_mappings;
    for (size_t i = 0; i < base->num_mappings; i++) {
        const struct hs_rep_mapping *m = &base->mappings[i];
        add_mapping(p, m->start, m->limit, m->offset, m->path, m->build_id);
    }
    if (base->period_type)
        merge_period(p, base->period_type, base->period_unit, base->period);
    for (size_t i = 0; i < base->num_stacks; i++) {
        struct hs_rep_stack *st = import_stack(p, base, &base->stacks[i], first_mapping);
        for (int v = 0; v < HS_FG_VALUES; v++)
            st->base[v] += base->stacks[i].values[v];
    }
    for (int v = 0; v < HS_FG_VALUES; v++)
        p->base_totals[v] = base->totals[v];
    p->diff = true;
    p->has_alloc = p->has_alloc && base->has_alloc;
}

const char *hs_rep_frame_label(struct hs_rep_profile *p, const struct hs_rep_frame *f)
{
    char buf[4096];
    if (f->file[0] && f->line)
        snprintf(buf, sizeof(buf), "%s (%s:%u)", f->function, file_name(f->file), f->line);
    else
        snprintf(buf, sizeof(buf), "%s", f->function);
    const char *key;
    strmap_get(&impl_of(p)->labels, buf, strlen(buf), 0, &key);
    return key;
}
