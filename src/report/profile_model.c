/* profile_model.c: building, symbolizing and diffing report profiles (see profile_model.h).
 *
 * Out of memory: every function that allocates says so to its caller (NULL, SIZE_MAX or
 * false), and the public functions return -1 with errno ENOMEM; the profile is then left
 * consistent (what was added so far), fit only for hs_rep_profile_free. */
#include "profile_model.h"

#include "hash.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "heap_dump_reader.h"
#include "pprof.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "symbolizer.h"

#include <errno.h>
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

/* Finds s; inserts it with value `val` when absent (returns the stored key in *key).
 * SIZE_MAX when memory ran out (*key is then NULL). */
static size_t strmap_get(struct strmap *m, const char *s, size_t n, size_t val, const char **key)
{
    if (key)
        *key = NULL;
    struct str_key k = {s, n};
    struct str_entry *e = strmap_find(m, &k);
    if (!e) {
        char *copy = malloc(n + 1);
        if (!copy)
            return SIZE_MAX;
        memcpy(copy, s, n);
        copy[n] = '\0';
        bool inserted;
        e = strmap_find_or_insert(m, &k, &inserted);
        if (!e) {
            free(copy);
            return SIZE_MAX;
        }
        *e = (struct str_entry){copy, val};
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

/* The profile's tables, made on first use; NULL when memory ran out. */
static struct impl *impl_of(struct hs_rep_profile *p)
{
    if (!p->impl) {
        struct impl *im = calloc(1, sizeof(struct impl));
        if (!im)
            return NULL;
        strmap_init(&im->strings, &hs_table_libc, NULL, 50);
        strmap_init(&im->stack_ids, &hs_table_libc, NULL, 50);
        strmap_init(&im->labels, &hs_table_libc, NULL, 50);
        p->impl = im;
    }
    return p->impl;
}

/* The profile's copy of s; NULL when memory ran out. */
static const char *intern(struct hs_rep_profile *p, const char *s)
{
    struct impl *im = impl_of(p);
    const char *key = NULL;
    if (im)
        strmap_get(&im->strings, s, strlen(s), 0, &key);
    return key;
}

/* Makes room for `need` elements of `elem` bytes in *array (capacity *cap). False when memory
 * ran out: *array and *cap are then as they were. */
static bool grow_array(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *a = c <= SIZE_MAX / elem ? realloc(*array, c * elem) : NULL;
    if (!a)
        return false;
    *array = a;
    *cap = c;
    return true;
}

#define GROW(array, cap, need) grow_array((void **)&(array), &(cap), (need), sizeof(*(array)))

/* The error of the public functions: out of memory. */
static int out_of_memory(char *err, size_t err_cap)
{
    if (err)
        snprintf(err, err_cap, "out of memory");
    errno = ENOMEM;
    return -1;
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

/* Appends a mapping to p; returns its index, or SIZE_MAX when memory ran out. */
static size_t add_mapping(struct hs_rep_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                          const char *path, const char *build_id)
{
    const char *ipath = intern(p, path), *ibuild_id = intern(p, build_id ? build_id : "");
    if (!ipath || !ibuild_id || !GROW(p->mappings, p->cap_mappings, p->num_mappings + 1))
        return SIZE_MAX;
    p->mappings[p->num_mappings] = (struct hs_rep_mapping){start, limit, offset, ipath, ibuild_id};
    return p->num_mappings++;
}

/* Takes an input's period type: the first one wins, the largest period of it stays. False
 * when memory ran out. */
static bool merge_period(struct hs_rep_profile *p, const char *type, const char *unit,
                         int64_t period)
{
    if (!type[0] && !unit[0])
        return true;
    if (!p->period_type) {
        const char *itype = intern(p, type), *iunit = intern(p, unit);
        if (!itype || !iunit)
            return false;
        p->period_type = itype;
        p->period_unit = iunit;
        p->period = period;
    } else if (strcmp(p->period_type, type) == 0 && strcmp(p->period_unit, unit) == 0 &&
               period > p->period) {
        p->period = period;
    }
    return true;
}

/* Symbolizes pc into a new location of p, in the given mapping (or HS_REP_NO_MAPPING).
 * Frames of dumps and unsymbolized profiles are call sites (heapscope's since call sites were
 * stored, Android's, Go's) or return addresses (dumps of earlier heapscope versions), and the
 * file does not say which: both are looked up at pc - 1, which lies inside the call
 * instruction either way (an x86_64 call is at least 2 bytes long). The location keeps the pc
 * as the file has it. Returns the location's index, or SIZE_MAX when memory ran out. */
static size_t add_location(struct hs_rep_profile *p, struct hs_symbolizer *sym, uint64_t pc,
                           size_t mapping)
{
    struct hs_frame_info info[HS_SYMBOLIZE_MAX_FRAMES];
    size_t n = sym ? hs_symbolize(sym, (uintptr_t)pc, 1, info, HS_SYMBOLIZE_MAX_FRAMES) : 0;
    if (!GROW(p->locations, p->cap_locations, p->num_locations + 1) ||
        !GROW(p->frames, p->cap_frames, p->num_frames + (n ? n : 1)))
        return SIZE_MAX;
    struct hs_rep_location *loc = &p->locations[p->num_locations];
    loc->pc = pc;
    loc->mapping = mapping;
    loc->first_frame = p->num_frames;
    loc->num_frames = n ? n : 1;
    loc->map = intern(p, n ? info[0].map_path : "");
    loc->rel_pc = n ? info[0].rel_pc : pc;
    loc->build_id = intern(p, n ? info[0].build_id : "");
    if (!loc->map || !loc->build_id)
        return SIZE_MAX;
    /* A dump's MAPS has no build ids: the file the symbolizer read gives it. */
    if (mapping != HS_REP_NO_MAPPING && !p->mappings[mapping].build_id[0] && loc->build_id[0] &&
        strcmp(loc->map, p->mappings[mapping].path) == 0)
        p->mappings[mapping].build_id = loc->build_id;
    if (n == 0) {
        char name[32];
        snprintf(name, sizeof(name), "0x%" PRIx64, pc);
        const char *iname = intern(p, name);
        if (!iname)
            return SIZE_MAX;
        p->frames[p->num_frames++] = (struct hs_rep_frame){iname, "", 0, false};
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
        const char *ifn = intern(p, fn), *ifile = intern(p, info[i].file);
        if (!ifn || !ifile)
            return SIZE_MAX;
        p->frames[p->num_frames++] =
            (struct hs_rep_frame){ifn, ifile, info[i].line, info[i].inlined};
    }
    return p->num_locations++;
}

/* A source file as the report shows it: its name without the directory. */
static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The stack with these locations (keyed by what the report shows of them), created when new;
 * NULL when memory ran out. */
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
    struct impl *im = impl_of(p);
    /* Room for the stack first: once its key is in the map, its index must exist. */
    if (!key || !im || !GROW(p->stacks, p->cap_stacks, p->num_stacks + 1)) {
        free(key);
        return NULL;
    }
    size_t *copy = malloc((depth ? depth : 1) * sizeof(size_t));
    size_t idx = copy ? strmap_get(&im->stack_ids, key, len, p->num_stacks, NULL) : SIZE_MAX;
    free(key);
    if (idx < p->num_stacks || idx == SIZE_MAX) {
        free(copy);
        return idx == SIZE_MAX ? NULL : &p->stacks[idx];
    }
    struct hs_rep_stack *st = &p->stacks[p->num_stacks++];
    memset(st, 0, sizeof(*st));
    st->locations = copy;
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

/* The value slot of pc (*found: it was there), or NULL when memory ran out. */
static size_t *pcmap_slot(struct pcmap *m, uint64_t pc, bool *found)
{
    uint64_t key = pc + 1; /* 0 marks an empty slot */
    bool inserted;
    struct pc_entry *e = pcmap_find_or_insert(m, &key, &inserted);
    if (!e)
        return NULL;
    if (inserted)
        *e = (struct pc_entry){key, 0};
    *found = !inserted;
    return &e->val;
}

/* The executable file mappings of a dump's MAPS, appended to p; non-zero (the parser stops)
 * when memory ran out. */
static int add_dump_mapping(const struct hs_map *m, void *arg)
{
    struct hs_rep_profile *p = arg;
    if (m->path[0] == '/' && (m->perms & HS_MAP_EXEC) &&
        add_mapping(p, m->start, m->end, m->offset, m->path, "") == SIZE_MAX)
        return -1;
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
        if (errno == ENOMEM)
            return out_of_memory(err, err_cap);
        snprintf(err, err_cap, "cannot set up the symbolizer");
        return -1;
    }
    /* This dump's mappings, for pprof output: each location points at the one holding it. */
    size_t first_mapping = p->num_mappings;
    struct hs_map scratch;
    struct hs_maps_parser parser;
    hs_maps_parser_init(&parser, &scratch);
    /* Malformed lines are skipped (EINVAL); without memory the report would lack symbols. */
    bool ok = hs_symbolizer_add_maps_text(sym, d->maps, d->maps_len) == 0 || errno != ENOMEM;
    int rc = ok ? hs_maps_parser_feed(&parser, d->maps, d->maps_len, add_dump_mapping, p) : 0;
    if (ok && rc == 0)
        rc = hs_maps_parser_finish(&parser, add_dump_mapping, p);
    ok = ok && rc == 0;
    if (p->num_mappings > first_mapping)
        qsort(p->mappings + first_mapping, p->num_mappings - first_mapping, sizeof(*p->mappings),
              by_start);
    /* A heap dump holds every allocation: nothing was sampled. */
    ok = ok && merge_period(p, "space", "bytes", 1);

    /* Count the distinct pcs first, for the progress line. */
    struct pcmap pcs;
    pcmap_init(&pcs, &hs_table_libc, NULL, 50);
    size_t distinct = 0, done = 0;
    for (size_t r = 0; ok && r < d->num_records; r++)
        for (uint32_t f = 0; ok && f < d->records[r].num_frames; f++) {
            bool found;
            ok = pcmap_slot(&pcs, d->records[r].frames[f], &found) != NULL;
            distinct += ok && !found;
        }
    pcmap_clear(&pcs);
    bool tty = opt->progress && isatty(2);

    size_t *locs = NULL, locs_cap = 0;
    for (size_t r = 0; ok && r < d->num_records; r++) {
        const struct hs_dump_record *rec = &d->records[r];
        ok = GROW(locs, locs_cap, rec->num_frames + 1);
        for (uint32_t f = 0; ok && f < rec->num_frames; f++) {
            bool found;
            size_t *slot = pcmap_slot(&pcs, rec->frames[f], &found);
            ok = slot != NULL;
            if (ok && !found) {
                *slot = add_location(p, sym, rec->frames[f],
                                     mapping_of(p, first_mapping, p->num_mappings, rec->frames[f]));
                ok = *slot != SIZE_MAX;
                if (tty && (++done % 1000 == 0 || done == distinct))
                    fprintf(stderr, "\rheapscope report: symbolizing %zu/%zu addresses", done,
                            distinct);
            }
            if (ok)
                locs[f] = *slot;
        }
        struct hs_rep_stack *st = ok ? stack_for(p, locs, rec->num_frames) : NULL;
        if (!st) {
            ok = false;
            break;
        }
        int64_t bytes = (int64_t)(rec->size * rec->num), count = (int64_t)rec->num;
        st->values[HS_FG_INUSE_BYTES] += bytes;
        st->values[HS_FG_INUSE_COUNT] += count;
        p->totals[HS_FG_INUSE_BYTES] += bytes;
        p->totals[HS_FG_INUSE_COUNT] += count;
    }
    if (tty && distinct >= 1000)
        fprintf(stderr, "\n");
    else if (ok && opt->progress && distinct >= 10000)
        fprintf(stderr, "heapscope report: symbolized %zu addresses\n", distinct);
    free(locs);
    pcmap_destroy(&pcs);
    hs_symbolizer_free(sym);
    return ok ? 0 : out_of_memory(err, err_cap);
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
 * symbolized, else symbolized here from its mapping's file (if the build ids agree). Returns
 * its index, or SIZE_MAX when memory ran out. */
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
        if (idx == SIZE_MAX)
            return SIZE_MAX;
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
            const char *iname = intern(p, name);
            if (!iname)
                return SIZE_MAX;
            loc->num_frames = 1;
            p->frames[loc->first_frame] = (struct hs_rep_frame){iname, "", 0, false};
        }
        return idx;
    }
    if (!GROW(p->locations, p->cap_locations, p->num_locations + 1) ||
        !GROW(p->frames, p->cap_frames, p->num_frames + l.num_lines))
        return SIZE_MAX;
    struct hs_rep_location *loc = &p->locations[p->num_locations];
    loc->pc = l.address;
    loc->mapping = mapping;
    loc->map = intern(p, m.filename ? m.filename : "");
    loc->rel_pc = m.filename ? l.address - m.start + m.offset : l.address;
    loc->build_id = intern(p, m.build_id ? m.build_id : "");
    if (!loc->map || !loc->build_id)
        return SIZE_MAX;
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
        const char *iname = intern(p, name), *ifile = intern(p, f.filename ? f.filename : "");
        if (!iname || !ifile)
            return SIZE_MAX;
        p->frames[p->num_frames++] = (struct hs_rep_frame){
            iname, ifile, l.lines[i].line > 0 ? (unsigned)l.lines[i].line : 0, i + 1 < l.num_lines};
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
    bool ok = merge_period(p, period.type, period.unit, hs_pprof_period(pp));
    /* The profile's mappings, all of them: its locations point into them. */
    size_t first_mapping = p->num_mappings;
    for (size_t i = 0; ok && i < hs_pprof_num_mappings(pp); i++) {
        struct hs_pprof_mapping_view m = hs_pprof_mapping_at(pp, i);
        ok = add_mapping(p, m.start, m.limit, m.offset, m.filename, m.build_id) != SIZE_MAX;
    }

    /* Unsymbolized locations are symbolized here, from the mappings' files (without a
     * symbolizer, for want of memory, the report would lack their names). */
    struct hs_symbolizer *sym = ok ? hs_symbolizer_new(opt->symbols_dir) : NULL;
    ok = ok && (sym || errno != ENOMEM);
    for (size_t i = 0; ok && sym && i < hs_pprof_num_mappings(pp); i++) {
        struct hs_pprof_mapping_view m = hs_pprof_mapping_at(pp, i);
        if (m.filename[0] == '/' && m.limit > m.start &&
            hs_symbolizer_add_map(sym, m.start, m.limit, m.offset, m.filename) != 0)
            ok = errno != ENOMEM;
    }
    size_t n = hs_pprof_num_locations(pp);
    size_t *loc_index = ok ? malloc((n ? n : 1) * sizeof(size_t)) : NULL;
    ok = ok && loc_index;
    bool warned = false;
    for (size_t i = 0; ok && i < n; i++) {
        loc_index[i] =
            add_pprof_location(p, pp, hs_pprof_location_at(pp, i), first_mapping, sym, &warned);
        ok = loc_index[i] != SIZE_MAX;
    }

    size_t *locs = NULL, locs_cap = 0;
    for (size_t s = 0; ok && s < hs_pprof_num_samples(pp); s++) {
        struct hs_pprof_sample_view sv = hs_pprof_sample_at(pp, s);
        if (!GROW(locs, locs_cap, sv.num_locations + 1)) {
            ok = false;
            break;
        }
        for (size_t l = 0; l < sv.num_locations; l++)
            locs[l] = loc_index[hs_pprof_location_index(pp, sv.location_ids[l])];
        struct hs_rep_stack *st = stack_for(p, locs, sv.num_locations);
        if (!st) {
            ok = false;
            break;
        }
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
    return ok ? 0 : out_of_memory(err, err_cap);
}

/* Copies a location of `from` into p (by its names); returns its index in p, or SIZE_MAX when
 * memory ran out. from's mapping i is p's mapping first_mapping + i. */
static size_t import_location(struct hs_rep_profile *p, const struct hs_rep_location *l,
                              const struct hs_rep_profile *from, size_t first_mapping)
{
    if (!GROW(p->locations, p->cap_locations, p->num_locations + 1) ||
        !GROW(p->frames, p->cap_frames, p->num_frames + l->num_frames))
        return SIZE_MAX;
    struct hs_rep_location *nl = &p->locations[p->num_locations];
    *nl = *l;
    if (l->mapping != HS_REP_NO_MAPPING)
        nl->mapping = first_mapping + l->mapping;
    nl->map = intern(p, l->map);
    nl->build_id = intern(p, l->build_id);
    nl->first_frame = p->num_frames;
    if (!nl->map || !nl->build_id)
        return SIZE_MAX;
    for (size_t f = 0; f < l->num_frames; f++) {
        struct hs_rep_frame fr = from->frames[l->first_frame + f];
        fr.function = intern(p, fr.function);
        fr.file = intern(p, fr.file);
        if (!fr.function || !fr.file)
            return SIZE_MAX;
        p->frames[p->num_frames++] = fr;
    }
    return p->num_locations++;
}

/* Copies a stack of `from` into p (by its names), returning p's stack, or NULL when memory ran
 * out. from's mapping i is p's mapping first_mapping + i. */
static struct hs_rep_stack *import_stack(struct hs_rep_profile *p,
                                         const struct hs_rep_profile *from,
                                         const struct hs_rep_stack *st, size_t first_mapping)
{
    size_t *locs = malloc((st->depth ? st->depth : 1) * sizeof(size_t));
    if (!locs)
        return NULL;
    for (size_t i = 0; i < st->depth; i++) {
        locs[i] = import_location(p, &from->locations[st->locations[i]], from, first_mapping);
        if (locs[i] == SIZE_MAX) {
            free(locs);
            return NULL;
        }
    }
    struct hs_rep_stack *mine = stack_for(p, locs, st->depth);
    free(locs);
    return mine;
}

int hs_rep_diff(struct hs_rep_profile *p, const struct hs_rep_profile *base)
{
    size_t first_mapping = p->num_mappings;
    for (size_t i = 0; i < base->num_mappings; i++) {
        const struct hs_rep_mapping *m = &base->mappings[i];
        if (add_mapping(p, m->start, m->limit, m->offset, m->path, m->build_id) == SIZE_MAX)
            return out_of_memory(NULL, 0);
    }
    if (base->period_type && !merge_period(p, base->period_type, base->period_unit, base->period))
        return out_of_memory(NULL, 0);
    for (size_t i = 0; i < base->num_stacks; i++) {
        struct hs_rep_stack *st = import_stack(p, base, &base->stacks[i], first_mapping);
        if (!st)
            return out_of_memory(NULL, 0);
        for (int v = 0; v < HS_FG_VALUES; v++)
            st->base[v] += base->stacks[i].values[v];
    }
    for (int v = 0; v < HS_FG_VALUES; v++)
        p->base_totals[v] = base->totals[v];
    p->diff = true;
    p->has_alloc = p->has_alloc && base->has_alloc;
    return 0;
}

const char *hs_rep_frame_label(struct hs_rep_profile *p, const struct hs_rep_frame *f)
{
    char buf[4096];
    if (f->file[0] && f->line)
        snprintf(buf, sizeof(buf), "%s (%s:%u)", f->function, file_name(f->file), f->line);
    else
        snprintf(buf, sizeof(buf), "%s", f->function);
    struct impl *im = impl_of(p);
    const char *key = NULL;
    if (im)
        strmap_get(&im->labels, buf, strlen(buf), 0, &key);
    if (!key)
        errno = ENOMEM;
    return key;
}
