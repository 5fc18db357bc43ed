/* pprof.c: pprof profiles built, written and read by hand-coded protobuf (see pprof.h).
 *
 * Model. Every table is a growable array; variable-length parts (a sample's location ids,
 * values and labels, a location's lines) live in shared pools and are referenced by offset and
 * count, so a sample costs 24 bytes plus its pool entries. Strings are stored NUL-terminated
 * back to back in one buffer, indexed by offset. String indices and pool offsets are 32-bit:
 * no table holds more than 2^32-1 entries.
 *
 * Hash maps are the shared table (hash_table.h), at most half full, their slots charged to the
 * memory budget through its allocator; a slot holds an entry
 * index + 1 (0: empty) and 32 bits of the key's hash, so most mismatches are rejected without
 * touching the entry. The builder keeps one per deduplicated kind; a read profile keeps one per
 * id kind (its ids are arbitrary; a built profile's ids are index + 1).
 *
 * Writer. Top-level fields go into a buffer that is handed to the sink (fwrite or deflate) each
 * time it passes 1 MiB; each submessage is encoded into a scratch buffer first, so its length
 * prefix is known. Fields are written in field-number order.
 *
 * Reader. Inflates (gzip/zlib) into one buffer, then walks the top-level fields five times:
 * (A) check every tag, wire type and length and count each field; (B) copy the string table;
 * (C) mappings and functions; (D) locations; (E) the rest. So every string index and id can
 * be checked against complete tables while the byte offset of the offending field is known,
 * and the top-level tables are allocated at their exact size. Memory is charged against the
 * budget before each allocation.
 */
#include "pprof.h"

#include "hash.h"
#include "hash_table.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- Model ---- */

struct pp_vt {
    uint32_t type, unit; /* string indices */
};

struct pp_sample {
    uint32_t loc_off, nloc; /* in locids */
    uint32_t val_off, nval; /* in vals */
    uint32_t lab_off, nlab; /* in labels */
};

struct pp_label {
    uint32_t key, str, num_unit;
    int64_t num;
};

struct pp_mapping {
    uint64_t id, start, limit, offset;
    uint32_t filename, build_id;
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

struct pp_location {
    uint64_t id, mapping_id, address;
    uint32_t line_off, nlines; /* in lines */
    bool folded;
};

struct pp_function {
    uint64_t id;
    uint32_t name, system_name, filename;
    int64_t start_line;
};

struct pp_slot {
    uint32_t idx1; /* entry index + 1; 0: empty */
    uint32_t hash;
};

struct hs_pprof;
typedef bool (*pp_eq_fn)(const struct hs_pprof *p, size_t idx, const void *key);

/* What a map lookup compares: the key's 32-bit hash, then eq on the entry it names. */
struct pp_probe {
    uint32_t hash;
    pp_eq_fn eq;
    const void *key;
};

static inline uint64_t pp_probe_hash(const struct pp_probe *k, const void *ctx)
{
    (void)ctx;
    return k->hash;
}
static inline uint64_t pp_slot_hash(const struct pp_slot *s, const void *ctx)
{
    (void)ctx;
    return s->hash;
}
static inline bool pp_slot_matches(const struct pp_slot *s, const struct pp_probe *k,
                                   const void *ctx)
{
    return s->hash == k->hash && k->eq(ctx, s->idx1 - 1, k->key);
}
static inline bool pp_slot_is_empty(const struct pp_slot *s)
{
    return s->idx1 == 0;
}
static inline void pp_slot_clear(struct pp_slot *s)
{
    s->idx1 = 0;
}

/* Entry index maps (hash_table.h); ctx is the profile, whose budget pays for the slots. */
HS_HASH_TABLE_DEFINE(pp_map, struct pp_slot, struct pp_probe, pp_probe_hash, pp_slot_hash,
                     pp_slot_matches, pp_slot_is_empty, pp_slot_clear)

struct hs_pprof {
    int err;
    bool read_only;
    bool over_budget; /* the last failed allocation hit mem_limit */
    size_t mem_used, mem_limit;

    char *sdata; /* strings, each NUL-terminated */
    size_t slen, scap;
    size_t *soff; /* offset of each string in sdata */
    size_t nstr, soff_cap;

    struct pp_vt *stypes;
    size_t nstypes, stypes_cap;
    struct pp_sample *samples;
    size_t nsamples, samples_cap;
    uint64_t *locids;
    size_t nlocids, locids_cap;
    uint64_t *vals; /* int64 values, viewed as int64_t */
    size_t nvals, vals_cap;
    struct pp_label *labels;
    size_t nlabels, labels_cap;
    struct pp_mapping *maps;
    size_t nmaps, maps_cap;
    struct pp_location *locs;
    size_t nlocs, locs_cap;
    struct hs_pprof_line *lines;
    size_t nlines, lines_cap;
    struct pp_function *funcs;
    size_t nfuncs, funcs_cap;
    uint64_t *comments; /* string indices */
    size_t ncomments, comments_cap;

    struct pp_vt period_type;
    int64_t period, time_nanos, duration_nanos;
    uint32_t drop_frames, keep_frames, default_st;

    /* Builder: deduplication. */
    struct pp_map str_map, map_dedup, func_dedup, loc_dedup;
    /* Read profiles: id -> index. */
    struct pp_map map_ids, func_ids, loc_ids;
};

/* Grows *ptr (an array of *cap elements of elem bytes) to hold need elements: doubling, or to
 * exactly need. Charges the budget. false: out of memory or over budget (p->over_budget). */
static bool pp_grow(struct hs_pprof *p, void **ptr, size_t *cap, size_t need, size_t elem,
                    bool exact)
{
    if (need <= *cap)
        return true;
    if (need > UINT32_MAX)
        return false;
    size_t nc = exact ? need : (*cap < 16 ? 16 : *cap);
    while (nc < need)
        nc *= 2;
    if (nc > UINT32_MAX)
        nc = UINT32_MAX;
    size_t bytes, old = *cap * elem;
    if (__builtin_mul_overflow(nc, elem, &bytes))
        return false;
    if (bytes - old > p->mem_limit - p->mem_used) {
        p->over_budget = true;
        return false;
    }
    void *q = realloc(*ptr, bytes);
    if (q == NULL)
        return false;
    p->mem_used += bytes - old;
    *ptr = q;
    *cap = nc;
    return true;
}

#define GROW(p, arr, cap, need) pp_grow((p), (void **)&(arr), &(cap), (need), sizeof(*(arr)), false)
#define RESERVE(p, arr, cap, need)                                                                 \
    pp_grow((p), (void **)&(arr), &(cap), (need), sizeof(*(arr)), true)

static void pp_fail(struct hs_pprof *p, int e)
{
    if (p->err == 0)
        p->err = e;
}

/* ---- Hashing and maps ---- */

/* Composite keys start from a seed: hash_add(hash_add(0, x), x) would be 0 for every x. */
#define HASH_SEED 0x243f6a8885a308d3ull

static inline uint64_t hash_add(uint64_t h, uint64_t v)
{
    h ^= v;
    h *= 0x9e3779b97f4a7c15ull;
    return (h << 29) | (h >> 35);
}

static uint64_t hash_bytes(const void *data, size_t n)
{
    const unsigned char *s = data;
    uint64_t h = hash_add(HASH_SEED, n);
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = hash_add(h, w);
    }
    if (n > 0) {
        uint64_t w = 0; /* the tail, without a variable-length memcpy call */
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)s[i] << (8 * i);
        h = hash_add(h, w);
    }
    return hs_hash_mix64(h);
}

static inline uint32_t hash32(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

/* The index of the entry equal to key, or HS_PPROF_NONE. */
static size_t map_find(const struct hs_pprof *p, const struct pp_map *m, uint32_t h, pp_eq_fn eq,
                       const void *key)
{
    (void)p;
    const struct pp_slot *s = pp_map_find(m, &(struct pp_probe){h, eq, key});
    return s ? s->idx1 - 1 : HS_PPROF_NONE;
}

/* Adds entry idx (not in the map yet) with hash h. */
static bool map_insert(struct hs_pprof *p, struct pp_map *m, uint32_t h, size_t idx)
{
    (void)p;
    if (idx >= UINT32_MAX || !pp_map_reserve(m, 1))
        return false;
    pp_map_put(m, &(struct pp_slot){(uint32_t)(idx + 1), h});
    return true;
}

static void map_free(struct pp_map *m)
{
    pp_map_destroy(m);
}

/* Map slots, charged against the profile's memory budget. */
static void *map_alloc(void *ctx, size_t size)
{
    struct hs_pprof *p = ctx;
    if (size > p->mem_limit - p->mem_used) {
        p->over_budget = true;
        return NULL;
    }
    void *slots = malloc(size);
    if (slots)
        p->mem_used += size;
    return slots;
}

static void map_release(void *ctx, void *slots, size_t size)
{
    struct hs_pprof *p = ctx;
    p->mem_used -= size;
    free(slots);
}

static void maps_init(struct hs_pprof *p)
{
    const struct hs_table_alloc a = {map_alloc, map_release, p};
    struct pp_map *maps[] = {&p->str_map, &p->map_dedup, &p->func_dedup, &p->loc_dedup,
                             &p->map_ids, &p->func_ids,  &p->loc_ids};
    for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
        pp_map_init(maps[i], &a, p, 50);
}

/* ---- Strings ---- */

static size_t str_len_at(const struct hs_pprof *p, size_t i)
{
    size_t end = i + 1 < p->nstr ? p->soff[i + 1] : p->slen;
    return end - p->soff[i] - 1;
}

static const char *str_at(const struct hs_pprof *p, size_t i)
{
    return i < p->nstr ? p->sdata + p->soff[i] : "";
}

struct str_key {
    const char *s;
    size_t n;
};

static bool str_eq(const struct hs_pprof *p, size_t idx, const void *key)
{
    const struct str_key *k = key;
    return str_len_at(p, idx) == k->n && memcmp(p->sdata + p->soff[idx], k->s, k->n) == 0;
}

/* Appends a string of n bytes (not interned). */
static bool str_append(struct hs_pprof *p, const char *s, size_t n, bool exact)
{
    if (n >= SIZE_MAX - p->slen - 1)
        return false;
    if (!pp_grow(p, (void **)&p->sdata, &p->scap, p->slen + n + 1, 1, exact) ||
        !pp_grow(p, (void **)&p->soff, &p->soff_cap, p->nstr + 1, sizeof(*p->soff), exact))
        return false;
    memcpy(p->sdata + p->slen, s, n);
    p->sdata[p->slen + n] = '\0';
    p->soff[p->nstr++] = p->slen;
    p->slen += n + 1;
    return true;
}

/* The index of s ("" for NULL) in the string table, added if new; UINT32_MAX on failure. */
static uint32_t intern(struct hs_pprof *p, const char *s)
{
    if (s == NULL)
        s = "";
    struct str_key k = {s, strlen(s)};
    uint32_t h = hash32(hash_bytes(k.s, k.n));
    size_t i = map_find(p, &p->str_map, h, str_eq, &k);
    if (i != HS_PPROF_NONE)
        return (uint32_t)i;
    i = p->nstr;
    if (i >= UINT32_MAX - 1 || !str_append(p, k.s, k.n, false) ||
        !map_insert(p, &p->str_map, h, i)) {
        pp_fail(p, ENOMEM);
        return UINT32_MAX;
    }
    return (uint32_t)i;
}

/* ---- Building ---- */

struct hs_pprof *hs_pprof_new(void)
{
    struct hs_pprof *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->mem_limit = SIZE_MAX;
    maps_init(p);
    if (intern(p, "") != 0) {
        hs_pprof_free(p);
        return NULL;
    }
    return p;
}

void hs_pprof_free(struct hs_pprof *p)
{
    if (p == NULL)
        return;
    free(p->sdata);
    free(p->soff);
    free(p->stypes);
    free(p->samples);
    free(p->locids);
    free(p->vals);
    free(p->labels);
    free(p->maps);
    free(p->locs);
    free(p->lines);
    free(p->funcs);
    free(p->comments);
    map_free(&p->str_map);
    map_free(&p->map_dedup);
    map_free(&p->func_dedup);
    map_free(&p->loc_dedup);
    map_free(&p->map_ids);
    map_free(&p->func_ids);
    map_free(&p->loc_ids);
    free(p);
}

int hs_pprof_error(const struct hs_pprof *p)
{
    return p ? p->err : EINVAL;
}

/* Whether builder calls may change p; marks a read profile failed. */
static bool buildable(struct hs_pprof *p)
{
    if (p == NULL)
        return false;
    if (p->read_only)
        pp_fail(p, EINVAL);
    return p->err == 0;
}

void hs_pprof_add_sample_type(struct hs_pprof *p, const char *type, const char *unit)
{
    if (!buildable(p))
        return;
    if (p->nsamples > 0) {
        pp_fail(p, EINVAL); /* earlier samples would lack this value */
        return;
    }
    uint32_t t = intern(p, type), u = intern(p, unit);
    if (p->err)
        return;
    if (!GROW(p, p->stypes, p->stypes_cap, p->nstypes + 1)) {
        pp_fail(p, ENOMEM);
        return;
    }
    p->stypes[p->nstypes++] = (struct pp_vt){t, u};
}

void hs_pprof_set_period(struct hs_pprof *p, const char *type, const char *unit, int64_t period)
{
    if (!buildable(p))
        return;
    uint32_t t = intern(p, type), u = intern(p, unit);
    if (p->err)
        return;
    p->period_type = (struct pp_vt){t, u};
    p->period = period;
}

void hs_pprof_set_default_sample_type(struct hs_pprof *p, const char *type)
{
    if (!buildable(p))
        return;
    uint32_t t = intern(p, type);
    if (p->err == 0)
        p->default_st = t;
}

void hs_pprof_set_time(struct hs_pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
    if (!buildable(p))
        return;
    p->time_nanos = time_nanos;
    p->duration_nanos = duration_nanos;
}

void hs_pprof_set_frame_filters(struct hs_pprof *p, const char *drop, const char *keep)
{
    if (!buildable(p))
        return;
    uint32_t d = intern(p, drop), k = intern(p, keep);
    if (p->err)
        return;
    p->drop_frames = d;
    p->keep_frames = k;
}

void hs_pprof_add_comment(struct hs_pprof *p, const char *text)
{
    if (!buildable(p))
        return;
    uint32_t t = intern(p, text);
    if (p->err)
        return;
    if (!GROW(p, p->comments, p->comments_cap, p->ncomments + 1)) {
        pp_fail(p, ENOMEM);
        return;
    }
    p->comments[p->ncomments++] = t;
}

static struct str_key make_key(const char *s)
{
    if (s == NULL)
        s = "";
    return (struct str_key){s, strlen(s)};
}

/* Keys of the mapping and function maps hold the strings themselves, so that a lookup that
 * finds an entry interns nothing. */
struct mapping_key {
    uint64_t start;
    struct str_key filename;
};

static bool mapping_eq(const struct hs_pprof *p, size_t idx, const void *key)
{
    const struct mapping_key *k = key;
    return p->maps[idx].start == k->start && str_eq(p, p->maps[idx].filename, &k->filename);
}

/* Appends a mapping; dedup: also enter it in the (start, filename) map under hash h. */
static uint64_t new_mapping(struct hs_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
                            const char *filename, const char *build_id, bool dedup, uint32_t h)
{
    uint32_t fi = intern(p, filename), b = intern(p, build_id);
    if (p->err)
        return 0;
    size_t i = p->nmaps;
    if (!GROW(p, p->maps, p->maps_cap, i + 1) || (dedup && !map_insert(p, &p->map_dedup, h, i))) {
        pp_fail(p, ENOMEM);
        return 0;
    }
    p->maps[i] = (struct pp_mapping){.id = i + 1,
                                     .start = start,
                                     .limit = limit,
                                     .offset = offset,
                                     .filename = fi,
                                     .build_id = b};
    p->nmaps++;
    return i + 1;
}

uint64_t hs_pprof_mapping(struct hs_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
                          const char *filename, const char *build_id)
{
    if (!buildable(p))
        return 0;
    struct mapping_key k = {start, make_key(filename)};
    uint32_t h = hash32(hs_hash_mix64(
        hash_add(hash_add(HASH_SEED, start), hash_bytes(k.filename.s, k.filename.n))));
    size_t i = map_find(p, &p->map_dedup, h, mapping_eq, &k);
    if (i != HS_PPROF_NONE)
        return p->maps[i].id;
    return new_mapping(p, start, limit, offset, filename, build_id, true, h);
}

uint64_t hs_pprof_add_mapping(struct hs_pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
                              const char *filename, const char *build_id)
{
    if (!buildable(p))
        return 0;
    return new_mapping(p, start, limit, offset, filename, build_id, false, 0);
}

void hs_pprof_mapping_set_flags(struct hs_pprof *p, uint64_t mapping_id, bool has_functions,
                                bool has_filenames, bool has_line_numbers, bool has_inline_frames)
{
    if (!buildable(p))
        return;
    if (mapping_id == 0 || mapping_id > p->nmaps) {
        pp_fail(p, EINVAL);
        return;
    }
    struct pp_mapping *m = &p->maps[mapping_id - 1];
    m->has_functions = has_functions;
    m->has_filenames = has_filenames;
    m->has_line_numbers = has_line_numbers;
    m->has_inline_frames = has_inline_frames;
}

struct function_key {
    struct str_key name, system_name, filename;
};

static bool function_eq(const struct hs_pprof *p, size_t idx, const void *key)
{
    const struct function_key *k = key;
    const struct pp_function *f = &p->funcs[idx];
    return str_eq(p, f->name, &k->name) && str_eq(p, f->system_name, &k->system_name) &&
           str_eq(p, f->filename, &k->filename);
}

uint64_t hs_pprof_function(struct hs_pprof *p, const char *name, const char *system_name,
                           const char *filename)
{
    if (!buildable(p))
        return 0;
    struct function_key k = {make_key(name), make_key(system_name), make_key(filename)};
    uint64_t hh = hash_add(HASH_SEED, hash_bytes(k.name.s, k.name.n));
    hh = hash_add(hh, hash_bytes(k.system_name.s, k.system_name.n));
    hh = hash_add(hh, hash_bytes(k.filename.s, k.filename.n));
    uint32_t h = hash32(hs_hash_mix64(hh));
    size_t i = map_find(p, &p->func_dedup, h, function_eq, &k);
    if (i != HS_PPROF_NONE)
        return p->funcs[i].id;
    uint32_t ni = intern(p, name), si = intern(p, system_name), fi = intern(p, filename);
    if (p->err)
        return 0;
    i = p->nfuncs;
    if (!GROW(p, p->funcs, p->funcs_cap, i + 1) || !map_insert(p, &p->func_dedup, h, i)) {
        pp_fail(p, ENOMEM);
        return 0;
    }
    p->funcs[i] = (struct pp_function){.id = i + 1, .name = ni, .system_name = si, .filename = fi};
    p->nfuncs++;
    return i + 1;
}

struct location_key {
    uint64_t mapping_id, address;
    const struct hs_pprof_line *lines;
    size_t nlines;
};

static bool location_eq(const struct hs_pprof *p, size_t idx, const void *key)
{
    const struct location_key *k = key;
    const struct pp_location *l = &p->locs[idx];
    if (l->mapping_id != k->mapping_id || l->address != k->address)
        return false;
    if (k->address != 0)
        return true;
    if (l->nlines != k->nlines)
        return false;
    for (size_t j = 0; j < k->nlines; j++) {
        const struct hs_pprof_line *a = &p->lines[l->line_off + j], *b = &k->lines[j];
        if (a->function_id != b->function_id || a->line != b->line)
            return false;
    }
    return true;
}

uint64_t hs_pprof_location(struct hs_pprof *p, uint64_t mapping_id, uint64_t address,
                           const struct hs_pprof_line *lines, size_t num_lines)
{
    if (!buildable(p))
        return 0;
    if (mapping_id > p->nmaps || (num_lines > 0 && lines == NULL)) {
        pp_fail(p, EINVAL);
        return 0;
    }
    struct location_key k = {mapping_id, address, lines, num_lines};
    uint64_t hh = hash_add(hash_add(HASH_SEED, mapping_id), address);
    if (address == 0) {
        for (size_t j = 0; j < num_lines; j++)
            hh = hash_add(hash_add(hh, lines[j].function_id), (uint64_t)lines[j].line);
    }
    uint32_t h = hash32(hs_hash_mix64(hh));
    size_t i = map_find(p, &p->loc_dedup, h, location_eq, &k);
    if (i != HS_PPROF_NONE)
        return p->locs[i].id;
    for (size_t j = 0; j < num_lines; j++) {
        if (lines[j].function_id > p->nfuncs) {
            pp_fail(p, EINVAL);
            return 0;
        }
    }
    i = p->nlocs;
    if (num_lines > UINT32_MAX - p->nlines ||
        !GROW(p, p->lines, p->lines_cap, p->nlines + num_lines) ||
        !GROW(p, p->locs, p->locs_cap, i + 1) || !map_insert(p, &p->loc_dedup, h, i)) {
        pp_fail(p, ENOMEM);
        return 0;
    }
    if (num_lines > 0)
        memcpy(&p->lines[p->nlines], lines, num_lines * sizeof(*lines));
    p->locs[i] = (struct pp_location){.id = i + 1,
                                      .mapping_id = mapping_id,
                                      .address = address,
                                      .line_off = (uint32_t)p->nlines,
                                      .nlines = (uint32_t)num_lines};
    p->nlines += num_lines;
    p->nlocs++;
    return i + 1;
}

void hs_pprof_add_sample_labeled(struct hs_pprof *p, const uint64_t *location_ids,
                                 size_t num_locations, const int64_t *values,
                                 const struct hs_pprof_label *labels, size_t num_labels)
{
    if (!buildable(p))
        return;
    if ((num_locations > 0 && location_ids == NULL) || (p->nstypes > 0 && values == NULL) ||
        (num_labels > 0 && labels == NULL)) {
        pp_fail(p, EINVAL);
        return;
    }
    for (size_t j = 0; j < num_locations; j++) {
        if (location_ids[j] == 0 || location_ids[j] > p->nlocs) {
            pp_fail(p, EINVAL);
            return;
        }
    }
    /* Intern the label strings first: that may fail, and must not leave a half sample. */
    for (size_t j = 0; j < num_labels; j++) {
        intern(p, labels[j].key);
        intern(p, labels[j].str);
        intern(p, labels[j].num_unit);
    }
    if (p->err)
        return;
    if (num_locations > UINT32_MAX - p->nlocids || p->nstypes > UINT32_MAX - p->nvals ||
        num_labels > UINT32_MAX - p->nlabels ||
        !GROW(p, p->locids, p->locids_cap, p->nlocids + num_locations) ||
        !GROW(p, p->vals, p->vals_cap, p->nvals + p->nstypes) ||
        !GROW(p, p->labels, p->labels_cap, p->nlabels + num_labels) ||
        !GROW(p, p->samples, p->samples_cap, p->nsamples + 1)) {
        pp_fail(p, ENOMEM);
        return;
    }
    struct pp_sample *s = &p->samples[p->nsamples++];
    *s = (struct pp_sample){(uint32_t)p->nlocids, (uint32_t)num_locations, (uint32_t)p->nvals,
                            (uint32_t)p->nstypes, (uint32_t)p->nlabels,    (uint32_t)num_labels};
    if (num_locations > 0)
        memcpy(&p->locids[p->nlocids], location_ids, num_locations * sizeof(*location_ids));
    p->nlocids += num_locations;
    for (size_t j = 0; j < p->nstypes; j++)
        p->vals[p->nvals++] = (uint64_t)values[j];
    for (size_t j = 0; j < num_labels; j++) {
        /* Already interned: these lookups cannot fail. */
        p->labels[p->nlabels++] = (struct pp_label){.key = intern(p, labels[j].key),
                                                    .str = intern(p, labels[j].str),
                                                    .num_unit = intern(p, labels[j].num_unit),
                                                    .num = labels[j].num};
    }
}

void hs_pprof_add_sample(struct hs_pprof *p, const uint64_t *location_ids, size_t num_locations,
                         const int64_t *values)
{
    hs_pprof_add_sample_labeled(p, location_ids, num_locations, values, NULL, 0);
}

/* ---- Writing ---- */

struct wbuf {
    uint8_t *d;
    size_t len, cap;
    bool oom;
};

static bool wb_reserve(struct wbuf *b, size_t n)
{
    if (b->oom)
        return false;
    if (b->cap - b->len >= n)
        return true;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc - b->len < n) {
        if (nc > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        nc *= 2;
    }
    uint8_t *q = realloc(b->d, nc);
    if (q == NULL) {
        b->oom = true;
        return false;
    }
    b->d = q;
    b->cap = nc;
    return true;
}

static inline size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Stores v at d (room for 10 bytes); returns the bytes written. */
static inline size_t put_varint(uint8_t *d, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        d[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    d[n++] = (uint8_t)v;
    return n;
}

static void wb_varint(struct wbuf *b, uint64_t v)
{
    if (wb_reserve(b, 10))
        b->len += put_varint(b->d + b->len, v);
}

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

static void wb_tag(struct wbuf *b, unsigned field, unsigned wt)
{
    wb_varint(b, (uint64_t)field << 3 | wt);
}

/* A varint field, omitted when 0 (the proto3 default). */
static void wb_uint(struct wbuf *b, unsigned field, uint64_t v)
{
    if (v == 0)
        return;
    wb_tag(b, field, WT_VARINT);
    wb_varint(b, v);
}

static void wb_bytes(struct wbuf *b, unsigned field, const void *data, size_t n)
{
    wb_tag(b, field, WT_LEN);
    wb_varint(b, n);
    if (n > 0 && wb_reserve(b, n)) {
        memcpy(b->d + b->len, data, n);
        b->len += n;
    }
}

/* A packed repeated varint field, omitted when empty. */
static void wb_packed(struct wbuf *b, unsigned field, const uint64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += varint_len(v[i]);
    wb_tag(b, field, WT_LEN);
    wb_varint(b, len);
    if (!wb_reserve(b, len))
        return;
    uint8_t *d = b->d + b->len;
    for (size_t i = 0; i < n; i++)
        d += put_varint(d, v[i]);
    b->len += len;
}

/* Where the encoded bytes go: the FILE, through deflate when gzip. */
struct sink {
    FILE *f;
    bool gzip;
    z_stream z;
    uint8_t *zout;
    int err; /* errno value of the first failure */
};

#define ZOUT_SIZE (256 * 1024)

static void sink_fwrite(struct sink *s, const void *d, size_t n)
{
    if (s->err == 0 && n > 0 && fwrite(d, 1, n, s->f) != n)
        s->err = errno ? errno : EIO;
}

static void sink_put(struct sink *s, const uint8_t *d, size_t n, bool finish)
{
    if (s->err)
        return;
    if (!s->gzip) {
        errno = 0;
        sink_fwrite(s, d, n);
        return;
    }
    s->z.next_in = (Bytef *)d;
    for (;;) {
        if (s->z.avail_in == 0 && n > 0) {
            size_t chunk = n < UINT_MAX ? n : UINT_MAX;
            s->z.avail_in = (uInt)chunk;
            n -= chunk;
        }
        int flush = finish && n == 0 ? Z_FINISH : Z_NO_FLUSH;
        s->z.next_out = s->zout;
        s->z.avail_out = ZOUT_SIZE;
        int rc = deflate(&s->z, flush);
        if (rc == Z_STREAM_ERROR) {
            s->err = EIO;
            return;
        }
        errno = 0;
        sink_fwrite(s, s->zout, ZOUT_SIZE - s->z.avail_out);
        if (s->err)
            return;
        if (flush == Z_FINISH ? rc == Z_STREAM_END : (s->z.avail_in == 0 && n == 0))
            return;
    }
}

/* Hands the buffer to the sink once it is big enough. */
static void maybe_flush(struct sink *s, struct wbuf *b)
{
    if (b->len >= (1u << 20) && !b->oom) {
        sink_put(s, b->d, b->len, false);
        b->len = 0;
    }
}

static void wb_value_type(struct wbuf *m, const struct pp_vt *vt)
{
    m->len = 0;
    wb_uint(m, 1, vt->type);
    wb_uint(m, 2, vt->unit);
}

/* profile.proto: "mapping[0] will be the main binary" (go tool pprof's "File:" line, and the
 * binary it symbolizes against). The writers make mappings as the pcs of their stacks meet
 * them, so the first made may be a library's ("File: libc.so.6" for a program whose stacks all
 * start in strdup). The main binary is the file mapping with the lowest start: the kernel maps
 * the executable low (a PIE at 0x55..., another at 0x400000), libraries and the loader high.
 * Its index in p->maps, 0 when there is no file mapping. */
static size_t main_mapping(const struct hs_pprof *p)
{
    size_t main_map = 0;
    bool found = false;
    for (size_t i = 0; i < p->nmaps; i++)
        if (str_at(p, p->maps[i].filename)[0] == '/' &&
            (!found || p->maps[i].start < p->maps[main_map].start)) {
            main_map = i;
            found = true;
        }
    return main_map;
}

int hs_pprof_write(struct hs_pprof *p, FILE *out, bool gzip)
{
    if (p == NULL || out == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (p->err) {
        errno = p->err;
        return -1;
    }
    struct sink s = {.f = out, .gzip = gzip};
    if (gzip) {
        s.zout = malloc(ZOUT_SIZE);
        if (s.zout == NULL) {
            errno = ENOMEM;
            return -1;
        }
        /* Level 1: a few times faster than the default for ~10% more bytes. */
        if (deflateInit2(&s.z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(s.zout);
            errno = ENOMEM;
            return -1;
        }
    }
    struct wbuf b = {0}, m = {0}, sub = {0};

    for (size_t i = 0; i < p->nstypes; i++) {
        wb_value_type(&m, &p->stypes[i]);
        wb_bytes(&b, 1, m.d, m.len);
    }
    for (size_t i = 0; i < p->nsamples && !s.err; i++) {
        const struct pp_sample *sm = &p->samples[i];
        m.len = 0;
        /* A sample may have no locations (and the array may then be NULL). */
        wb_packed(&m, 1, sm->nloc ? p->locids + sm->loc_off : NULL, sm->nloc);
        wb_packed(&m, 2, sm->nval ? p->vals + sm->val_off : NULL, sm->nval);
        for (size_t j = 0; j < sm->nlab; j++) {
            const struct pp_label *l = &p->labels[sm->lab_off + j];
            sub.len = 0;
            wb_uint(&sub, 1, l->key);
            wb_uint(&sub, 2, l->str);
            wb_uint(&sub, 3, (uint64_t)l->num);
            wb_uint(&sub, 4, l->num_unit);
            wb_bytes(&m, 3, sub.d, sub.len);
        }
        wb_bytes(&b, 2, m.d, m.len);
        maybe_flush(&s, &b);
    }
    size_t main_map = main_mapping(p);
    for (size_t k = 0; k < p->nmaps; k++) {
        /* The main binary first, the others in the order they were made. */
        size_t i = k == 0 ? main_map : k <= main_map ? k - 1 : k;
        const struct pp_mapping *mp = &p->maps[i];
        m.len = 0;
        wb_uint(&m, 1, mp->id);
        wb_uint(&m, 2, mp->start);
        wb_uint(&m, 3, mp->limit);
        wb_uint(&m, 4, mp->offset);
        wb_uint(&m, 5, mp->filename);
        wb_uint(&m, 6, mp->build_id);
        wb_uint(&m, 7, mp->has_functions);
        wb_uint(&m, 8, mp->has_filenames);
        wb_uint(&m, 9, mp->has_line_numbers);
        wb_uint(&m, 10, mp->has_inline_frames);
        wb_bytes(&b, 3, m.d, m.len);
        maybe_flush(&s, &b);
    }
    for (size_t i = 0; i < p->nlocs && !s.err; i++) {
        const struct pp_location *l = &p->locs[i];
        m.len = 0;
        wb_uint(&m, 1, l->id);
        wb_uint(&m, 2, l->mapping_id);
        wb_uint(&m, 3, l->address);
        for (size_t j = 0; j < l->nlines; j++) {
            const struct hs_pprof_line *ln = &p->lines[l->line_off + j];
            sub.len = 0;
            wb_uint(&sub, 1, ln->function_id);
            wb_uint(&sub, 2, (uint64_t)ln->line);
            wb_bytes(&m, 4, sub.d, sub.len);
        }
        wb_uint(&m, 5, l->folded);
        wb_bytes(&b, 4, m.d, m.len);
        maybe_flush(&s, &b);
    }
    for (size_t i = 0; i < p->nfuncs && !s.err; i++) {
        const struct pp_function *f = &p->funcs[i];
        m.len = 0;
        wb_uint(&m, 1, f->id);
        wb_uint(&m, 2, f->name);
        wb_uint(&m, 3, f->system_name);
        wb_uint(&m, 4, f->filename);
        wb_uint(&m, 5, (uint64_t)f->start_line);
        wb_bytes(&b, 5, m.d, m.len);
        maybe_flush(&s, &b);
    }
    for (size_t i = 0; i < p->nstr && !s.err; i++) {
        wb_bytes(&b, 6, p->sdata + p->soff[i], str_len_at(p, i));
        maybe_flush(&s, &b);
    }
    wb_uint(&b, 7, p->drop_frames);
    wb_uint(&b, 8, p->keep_frames);
    wb_uint(&b, 9, (uint64_t)p->time_nanos);
    wb_uint(&b, 10, (uint64_t)p->duration_nanos);
    if (p->period_type.type != 0 || p->period_type.unit != 0) {
        wb_value_type(&m, &p->period_type);
        wb_bytes(&b, 11, m.d, m.len);
    }
    wb_uint(&b, 12, (uint64_t)p->period);
    wb_packed(&b, 13, p->comments, p->ncomments);
    wb_uint(&b, 14, p->default_st);

    bool oom = b.oom || m.oom || sub.oom;
    if (!oom)
        sink_put(&s, b.d, b.len, true);
    if (gzip) {
        deflateEnd(&s.z);
        free(s.zout);
    }
    free(b.d);
    free(m.d);
    free(sub.d);
    if (oom && s.err == 0)
        s.err = ENOMEM;
    if (s.err == 0 && fflush(out) != 0)
        s.err = errno ? errno : EIO;
    if (s.err) {
        errno = s.err;
        return -1;
    }
    return 0;
}

/* ---- Reading ---- */

struct rd {
    const uint8_t *b; /* the protobuf */
    size_t n;
    const char *offsets_in; /* what error offsets count: "" (the input), " of the ..." */
    char *err;
    size_t err_cap;
    struct hs_pprof *p;
    bool nomem; /* the failure was for want of memory: errno ENOMEM, else EINVAL */
};

/* What an error is about: "profile", or kind[idx]. */
struct where {
    const char *kind;
    size_t idx; /* HS_PPROF_NONE: no index */
};

static const struct where TOP = {"profile", HS_PPROF_NONE};

__attribute__((format(printf, 4, 5))) static bool rd_fail(struct rd *r, struct where w, size_t off,
                                                          const char *fmt, ...)
{
    if (r->err == NULL || r->err_cap == 0)
        return false;
    int k;
    if (w.idx == HS_PPROF_NONE)
        k = snprintf(r->err, r->err_cap, "%s: ", w.kind);
    else
        k = snprintf(r->err, r->err_cap, "%s[%zu]: ", w.kind, w.idx);
    if (k < 0 || (size_t)k >= r->err_cap)
        return false;
    va_list ap;
    va_start(ap, fmt);
    int k2 = vsnprintf(r->err + k, r->err_cap - k, fmt, ap);
    va_end(ap);
    if (k2 < 0 || (size_t)k2 >= r->err_cap - k)
        return false;
    k += k2;
    snprintf(r->err + k, r->err_cap - k, " (at byte %zu%s)", off, r->offsets_in);
    return false;
}

/* Failure of an allocation of the model. */
static bool rd_nomem(struct rd *r, struct where w, size_t off)
{
    if (r->p->over_budget)
        return rd_fail(r, w, off, "the profile needs more than %zu bytes of memory (the limit)",
                       r->p->mem_limit);
    r->nomem = true;
    return rd_fail(r, w, off, "out of memory");
}

static bool rd_varint(struct rd *r, struct where w, size_t *pos, size_t end, uint64_t *out)
{
    size_t start = *pos;
    uint64_t v = 0;
    for (unsigned i = 0;; i++) {
        if (*pos >= end)
            return rd_fail(r, w, start, "truncated varint (its message ends at byte %zu)", end);
        uint8_t c = r->b[(*pos)++];
        if (i == 9 && c > 1)
            return rd_fail(r, w, start, "varint longer than 10 bytes or above 2^64-1");
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80))
            break;
    }
    *out = v;
    return true;
}

struct fld {
    uint64_t num;
    unsigned wt;
    size_t off;    /* of the tag */
    uint64_t v;    /* WT_VARINT */
    size_t p0, p1; /* WT_LEN: the payload */
};

static const char *wt_name(unsigned wt)
{
    switch (wt) {
    case WT_VARINT:
        return "varint";
    case WT_FIXED64:
        return "fixed64";
    case WT_LEN:
        return "length-delimited";
    case WT_FIXED32:
        return "fixed32";
    case 3:
    case 4:
        return "group";
    default:
        return "invalid";
    }
}

/* Reads the field at *pos (its message ends at end) and moves past it. */
static bool rd_field(struct rd *r, struct where w, size_t *pos, size_t end, struct fld *f)
{
    f->off = *pos;
    uint64_t tag;
    if (!rd_varint(r, w, pos, end, &tag))
        return false;
    f->num = tag >> 3;
    f->wt = tag & 7;
    if (f->num == 0 || f->num > 0x1fffffff)
        return rd_fail(r, w, f->off, "invalid field number %llu", (unsigned long long)f->num);
    size_t left;
    uint64_t len;
    switch (f->wt) {
    case WT_VARINT:
        return rd_varint(r, w, pos, end, &f->v);
    case WT_FIXED64:
    case WT_FIXED32:
        len = f->wt == WT_FIXED64 ? 8 : 4;
        if (end - *pos < len)
            return rd_fail(r, w, f->off, "%s field %llu runs past the end of its message",
                           wt_name(f->wt), (unsigned long long)f->num);
        *pos += len;
        return true;
    case WT_LEN:
        if (!rd_varint(r, w, pos, end, &len))
            return false;
        left = end - *pos;
        if (len > left)
            return rd_fail(r, w, f->off,
                           "field %llu has length %llu, past the end of its message (%zu bytes "
                           "left)",
                           (unsigned long long)f->num, (unsigned long long)len, left);
        f->p0 = *pos;
        f->p1 = *pos + len;
        *pos = f->p1;
        return true;
    case 3:
    case 4:
        return rd_fail(r, w, f->off, "field %llu uses the group wire type %u, not supported",
                       (unsigned long long)f->num, f->wt);
    default:
        return rd_fail(r, w, f->off, "field %llu has the invalid wire type %u",
                       (unsigned long long)f->num, f->wt);
    }
}

static bool rd_want(struct rd *r, struct where w, const struct fld *f, unsigned wt,
                    const char *name)
{
    if (f->wt == wt)
        return true;
    return rd_fail(r, w, f->off, "field %llu (%s) has wire type %u (%s), expected %u (%s)",
                   (unsigned long long)f->num, name, f->wt, wt_name(f->wt), wt, wt_name(wt));
}

/* A repeated varint field, packed (WT_LEN) or not (WT_VARINT). */
static bool rd_want_repeated(struct rd *r, struct where w, const struct fld *f, const char *name)
{
    if (f->wt == WT_VARINT || f->wt == WT_LEN)
        return true;
    return rd_fail(r, w, f->off,
                   "field %llu (%s) has wire type %u (%s), expected 0 (varint) or 2 (packed)",
                   (unsigned long long)f->num, name, f->wt, wt_name(f->wt));
}

/* Appends the values of a repeated varint field to a pool. */
static bool rd_append_varints(struct rd *r, struct where w, const struct fld *f, uint64_t **pool,
                              size_t *n, size_t *cap)
{
    if (f->wt == WT_VARINT) {
        if (!pp_grow(r->p, (void **)pool, cap, *n + 1, sizeof(**pool), false))
            return rd_nomem(r, w, f->off);
        (*pool)[(*n)++] = f->v;
        return true;
    }
    size_t count = 0; /* at most: the bytes ending a varint */
    for (size_t i = f->p0; i < f->p1; i++)
        count += !(r->b[i] & 0x80);
    if (!pp_grow(r->p, (void **)pool, cap, *n + count, sizeof(**pool), false))
        return rd_nomem(r, w, f->off);
    for (size_t pos = f->p0; pos < f->p1;) {
        uint64_t v;
        if (!rd_varint(r, w, &pos, f->p1, &v))
            return false;
        (*pool)[(*n)++] = v;
    }
    return true;
}

/* A string index in a varint field. */
static bool rd_str(struct rd *r, struct where w, const struct fld *f, const char *name,
                   uint32_t *out)
{
    if (!rd_want(r, w, f, WT_VARINT, name))
        return false;
    if (f->v >= r->p->nstr)
        return rd_fail(r, w, f->off,
                       "%s is string index %lld, out of range (the string table has %zu entries)",
                       name, (long long)f->v, r->p->nstr);
    *out = (uint32_t)f->v;
    return true;
}

static bool rd_num(struct rd *r, struct where w, const struct fld *f, const char *name,
                   uint64_t *out)
{
    if (!rd_want(r, w, f, WT_VARINT, name))
        return false;
    *out = f->v;
    return true;
}

static bool rd_int(struct rd *r, struct where w, const struct fld *f, const char *name,
                   int64_t *out)
{
    if (!rd_want(r, w, f, WT_VARINT, name))
        return false;
    *out = (int64_t)f->v;
    return true;
}

static bool rd_bool(struct rd *r, struct where w, const struct fld *f, const char *name, bool *out)
{
    if (!rd_want(r, w, f, WT_VARINT, name))
        return false;
    *out = f->v != 0;
    return true;
}

static bool rd_value_type(struct rd *r, struct where w, size_t p0, size_t p1, struct pp_vt *vt)
{
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        bool ok = true;
        if (f.num == 1)
            ok = rd_str(r, w, &f, "type", &vt->type);
        else if (f.num == 2)
            ok = rd_str(r, w, &f, "unit", &vt->unit);
        if (!ok)
            return false;
    }
    return true;
}

static bool id_eq_mapping(const struct hs_pprof *p, size_t idx, const void *key)
{
    return p->maps[idx].id == *(const uint64_t *)key;
}

static bool id_eq_function(const struct hs_pprof *p, size_t idx, const void *key)
{
    return p->funcs[idx].id == *(const uint64_t *)key;
}

static bool id_eq_location(const struct hs_pprof *p, size_t idx, const void *key)
{
    return p->locs[idx].id == *(const uint64_t *)key;
}

static uint32_t id_hash(uint64_t id)
{
    return hash32(hs_hash_mix64(id));
}

/* Registers the id of entry idx; fails on id 0 and duplicates. */
static bool rd_add_id(struct rd *r, struct where w, size_t off, struct pp_map *m, pp_eq_fn eq,
                      uint64_t id, size_t idx)
{
    if (id == 0)
        return rd_fail(r, w, off, "id is 0 (ids must be nonzero)");
    uint32_t h = id_hash(id);
    size_t prev = map_find(r->p, m, h, eq, &id);
    if (prev != HS_PPROF_NONE)
        return rd_fail(r, w, off, "duplicate id %llu (also %s[%zu])", (unsigned long long)id,
                       w.kind, prev);
    if (!map_insert(r->p, m, h, idx))
        return rd_nomem(r, w, off);
    return true;
}

static bool rd_mapping(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct pp_mapping *m = &r->p->maps[w.idx];
    *m = (struct pp_mapping){0};
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        bool ok = true;
        switch (f.num) {
        case 1:
            ok = rd_num(r, w, &f, "id", &m->id);
            break;
        case 2:
            ok = rd_num(r, w, &f, "memory_start", &m->start);
            break;
        case 3:
            ok = rd_num(r, w, &f, "memory_limit", &m->limit);
            break;
        case 4:
            ok = rd_num(r, w, &f, "file_offset", &m->offset);
            break;
        case 5:
            ok = rd_str(r, w, &f, "filename", &m->filename);
            break;
        case 6:
            ok = rd_str(r, w, &f, "build_id", &m->build_id);
            break;
        case 7:
            ok = rd_bool(r, w, &f, "has_functions", &m->has_functions);
            break;
        case 8:
            ok = rd_bool(r, w, &f, "has_filenames", &m->has_filenames);
            break;
        case 9:
            ok = rd_bool(r, w, &f, "has_line_numbers", &m->has_line_numbers);
            break;
        case 10:
            ok = rd_bool(r, w, &f, "has_inline_frames", &m->has_inline_frames);
            break;
        }
        if (!ok)
            return false;
    }
    r->p->nmaps = w.idx + 1;
    return rd_add_id(r, w, off, &r->p->map_ids, id_eq_mapping, m->id, w.idx);
}

static bool rd_function(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct pp_function *fn = &r->p->funcs[w.idx];
    *fn = (struct pp_function){0};
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        bool ok = true;
        switch (f.num) {
        case 1:
            ok = rd_num(r, w, &f, "id", &fn->id);
            break;
        case 2:
            ok = rd_str(r, w, &f, "name", &fn->name);
            break;
        case 3:
            ok = rd_str(r, w, &f, "system_name", &fn->system_name);
            break;
        case 4:
            ok = rd_str(r, w, &f, "filename", &fn->filename);
            break;
        case 5:
            ok = rd_int(r, w, &f, "start_line", &fn->start_line);
            break;
        }
        if (!ok)
            return false;
    }
    r->p->nfuncs = w.idx + 1;
    return rd_add_id(r, w, off, &r->p->func_ids, id_eq_function, fn->id, w.idx);
}

static bool rd_line(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct hs_pprof *p = r->p;
    if (!GROW(p, p->lines, p->lines_cap, p->nlines + 1))
        return rd_nomem(r, w, off);
    struct hs_pprof_line *ln = &p->lines[p->nlines];
    *ln = (struct hs_pprof_line){0};
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        if (f.num == 1) {
            if (!rd_num(r, w, &f, "line.function_id", &ln->function_id))
                return false;
            if (ln->function_id != 0 &&
                hs_pprof_function_index(p, ln->function_id) == HS_PPROF_NONE)
                return rd_fail(r, w, f.off, "line has function id %llu, which does not exist",
                               (unsigned long long)ln->function_id);
        } else if (f.num == 2) {
            if (!rd_int(r, w, &f, "line.line", &ln->line))
                return false;
        }
    }
    p->nlines++;
    return true;
}

static bool rd_location(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct hs_pprof *p = r->p;
    struct pp_location *l = &p->locs[w.idx];
    *l = (struct pp_location){.line_off = (uint32_t)p->nlines};
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        bool ok = true;
        switch (f.num) {
        case 1:
            ok = rd_num(r, w, &f, "id", &l->id);
            break;
        case 2:
            ok = rd_num(r, w, &f, "mapping_id", &l->mapping_id);
            if (ok && l->mapping_id != 0 &&
                hs_pprof_mapping_index(p, l->mapping_id) == HS_PPROF_NONE)
                return rd_fail(r, w, f.off, "mapping id %llu does not exist",
                               (unsigned long long)l->mapping_id);
            break;
        case 3:
            ok = rd_num(r, w, &f, "address", &l->address);
            break;
        case 4:
            ok = rd_want(r, w, &f, WT_LEN, "line") && rd_line(r, w, f.off, f.p0, f.p1);
            break;
        case 5:
            ok = rd_bool(r, w, &f, "is_folded", &l->folded);
            break;
        }
        if (!ok)
            return false;
    }
    l->nlines = (uint32_t)(p->nlines - l->line_off);
    p->nlocs = w.idx + 1;
    return rd_add_id(r, w, off, &p->loc_ids, id_eq_location, l->id, w.idx);
}

static bool rd_label(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct hs_pprof *p = r->p;
    if (!GROW(p, p->labels, p->labels_cap, p->nlabels + 1))
        return rd_nomem(r, w, off);
    struct pp_label *l = &p->labels[p->nlabels];
    *l = (struct pp_label){0};
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        bool ok = true;
        switch (f.num) {
        case 1:
            ok = rd_str(r, w, &f, "label.key", &l->key);
            break;
        case 2:
            ok = rd_str(r, w, &f, "label.str", &l->str);
            break;
        case 3:
            ok = rd_int(r, w, &f, "label.num", &l->num);
            break;
        case 4:
            ok = rd_str(r, w, &f, "label.num_unit", &l->num_unit);
            break;
        }
        if (!ok)
            return false;
    }
    p->nlabels++;
    return true;
}

static bool rd_sample(struct rd *r, struct where w, size_t off, size_t p0, size_t p1)
{
    struct hs_pprof *p = r->p;
    size_t loc0 = p->nlocids, val0 = p->nvals, lab0 = p->nlabels;
    struct fld f;
    size_t pos = p0;
    while (pos < p1) {
        if (!rd_field(r, w, &pos, p1, &f))
            return false;
        if (f.num == 1) {
            size_t first = p->nlocids;
            if (!rd_want_repeated(r, w, &f, "location_id") ||
                !rd_append_varints(r, w, &f, &p->locids, &p->nlocids, &p->locids_cap))
                return false;
            for (size_t j = first; j < p->nlocids; j++)
                if (hs_pprof_location_index(p, p->locids[j]) == HS_PPROF_NONE)
                    return rd_fail(r, w, f.off, "location id %llu does not exist",
                                   (unsigned long long)p->locids[j]);
        } else if (f.num == 2) {
            if (!rd_want_repeated(r, w, &f, "value") ||
                !rd_append_varints(r, w, &f, &p->vals, &p->nvals, &p->vals_cap))
                return false;
        } else if (f.num == 3) {
            if (!rd_want(r, w, &f, WT_LEN, "label") || !rd_label(r, w, f.off, f.p0, f.p1))
                return false;
        }
    }
    if (p->nvals - val0 != p->nstypes)
        return rd_fail(r, w, off, "%zu values for %zu sample types", p->nvals - val0, p->nstypes);
    p->samples[w.idx] = (struct pp_sample){(uint32_t)loc0, (uint32_t)(p->nlocids - loc0),
                                           (uint32_t)val0, (uint32_t)(p->nvals - val0),
                                           (uint32_t)lab0, (uint32_t)(p->nlabels - lab0)};
    p->nsamples = w.idx + 1;
    return true;
}

/* Top-level fields: their names and wire types (0 or 2; 13 is repeated). */
static const struct {
    const char *name;
    unsigned wt;
} TOP_FIELDS[15] = {
    {NULL, 0},
    {"sample_type", WT_LEN},
    {"sample", WT_LEN},
    {"mapping", WT_LEN},
    {"location", WT_LEN},
    {"function", WT_LEN},
    {"string_table", WT_LEN},
    {"drop_frames", WT_VARINT},
    {"keep_frames", WT_VARINT},
    {"time_nanos", WT_VARINT},
    {"duration_nanos", WT_VARINT},
    {"period_type", WT_LEN},
    {"period", WT_VARINT},
    {"comment", WT_VARINT},
    {"default_sample_type", WT_VARINT},
};

/* Pass A: checks the framing of every top-level field and counts them. */
static bool rd_scan(struct rd *r, size_t counts[15], size_t *str_bytes)
{
    struct fld f;
    size_t pos = 0;
    while (pos < r->n) {
        if (!rd_field(r, TOP, &pos, r->n, &f))
            return false;
        if (f.num > 14)
            continue;
        bool ok = f.num == 13 ? rd_want_repeated(r, TOP, &f, "comment")
                              : rd_want(r, TOP, &f, TOP_FIELDS[f.num].wt, TOP_FIELDS[f.num].name);
        if (!ok)
            return false;
        counts[f.num]++;
        if (f.num == 6)
            *str_bytes += f.p1 - f.p0;
    }
    return true;
}

/* Passes B to E: pass 'B' strings, 'C' mappings and functions, 'D' locations, 'E' the rest. */
static bool rd_pass(struct rd *r, char pass)
{
    struct hs_pprof *p = r->p;
    struct fld f;
    size_t pos = 0, nstypes = 0, nsamples = 0, nmaps = 0, nfuncs = 0, nlocs = 0;
    while (pos < r->n) {
        if (!rd_field(r, TOP, &pos, r->n, &f))
            return false;
        bool ok = true;
        switch (pass * 16 + (f.num <= 14 ? (int)f.num : 0)) {
        case 'B' * 16 + 6:
            if (p->nstr == 0 && f.p1 != f.p0)
                return rd_fail(r, (struct where){"profile.string_table", 0}, f.off,
                               "the first string is not \"\" (it has %zu bytes)", f.p1 - f.p0);
            ok = str_append(p, (const char *)r->b + f.p0, f.p1 - f.p0, true);
            if (!ok)
                return rd_nomem(r, TOP, f.off);
            break;
        case 'C' * 16 + 3:
            ok = rd_mapping(r, (struct where){"profile.mapping", nmaps++}, f.off, f.p0, f.p1);
            break;
        case 'C' * 16 + 5:
            ok = rd_function(r, (struct where){"profile.function", nfuncs++}, f.off, f.p0, f.p1);
            break;
        case 'D' * 16 + 4:
            ok = rd_location(r, (struct where){"profile.location", nlocs++}, f.off, f.p0, f.p1);
            break;
        case 'E' * 16 + 1:
            ok = rd_value_type(r, (struct where){"profile.sample_type", nstypes}, f.p0, f.p1,
                               &p->stypes[nstypes]);
            nstypes++;
            break;
        case 'E' * 16 + 2:
            ok = rd_sample(r, (struct where){"profile.sample", nsamples++}, f.off, f.p0, f.p1);
            break;
        case 'E' * 16 + 7:
            ok = rd_str(r, TOP, &f, "drop_frames", &p->drop_frames);
            break;
        case 'E' * 16 + 8:
            ok = rd_str(r, TOP, &f, "keep_frames", &p->keep_frames);
            break;
        case 'E' * 16 + 9:
            p->time_nanos = (int64_t)f.v;
            break;
        case 'E' * 16 + 10:
            p->duration_nanos = (int64_t)f.v;
            break;
        case 'E' * 16 + 11:
            ok = rd_value_type(r, (struct where){"profile.period_type", HS_PPROF_NONE}, f.p0, f.p1,
                               &p->period_type);
            break;
        case 'E' * 16 + 12:
            p->period = (int64_t)f.v;
            break;
        case 'E' * 16 + 13: {
            size_t first = p->ncomments;
            ok = rd_append_varints(r, TOP, &f, &p->comments, &p->ncomments, &p->comments_cap);
            for (size_t j = first; ok && j < p->ncomments; j++)
                if (p->comments[j] >= p->nstr)
                    return rd_fail(r, TOP, f.off,
                                   "comment is string index %lld, out of range (the string "
                                   "table has %zu entries)",
                                   (long long)p->comments[j], p->nstr);
            break;
        }
        case 'E' * 16 + 14:
            ok = rd_str(r, TOP, &f, "default_sample_type", &p->default_st);
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}

static bool bomb(struct rd *r, size_t off, size_t max)
{
    return rd_fail(r, TOP, off,
                   "the compressed data expands to more than %zu bytes, the limit (a zip bomb?)",
                   max);
}

/* Inflates gzip or zlib data into *out (malloc'd), at most max bytes. */
static bool rd_inflate(struct rd *r, const uint8_t *in, size_t n, size_t max, uint8_t **out,
                       size_t *out_len)
{
    z_stream z = {0};
    int init = inflateInit2(&z, 15 + 32);
    if (init != Z_OK) {
        r->nomem = init == Z_MEM_ERROR;
        return rd_fail(r, TOP, 0, "cannot initialize zlib");
    }
    size_t cap = n < max / 4 ? n * 4 : max;
    if (cap < 4096)
        cap = max < 4096 ? max + 1 : 4096;
    uint8_t *buf = malloc(cap);
    size_t len = 0, in_left = n;
    const uint8_t *next = in;
    bool ok = buf != NULL;
    if (!ok) {
        r->nomem = true;
        rd_fail(r, TOP, 0, "out of memory");
    }
    while (ok) {
        if (z.avail_in == 0 && in_left > 0) {
            size_t chunk = in_left < UINT_MAX ? in_left : UINT_MAX;
            z.next_in = (Bytef *)next;
            z.avail_in = (uInt)chunk;
            next += chunk;
            in_left -= chunk;
        }
        if (len == cap) {
            if (cap > max) {
                ok = bomb(r, (size_t)(next - in) - z.avail_in, max);
                break;
            }
            size_t ncap = cap <= max / 2 ? cap * 2 : max + 1;
            uint8_t *q = realloc(buf, ncap);
            if (q == NULL) {
                r->nomem = true;
                ok = rd_fail(r, TOP, 0, "out of memory (%zu bytes of decompressed data)", ncap);
                break;
            }
            buf = q;
            cap = ncap;
        }
        size_t room = cap - len < UINT_MAX ? cap - len : UINT_MAX;
        z.next_out = buf + len;
        z.avail_out = (uInt)room;
        int rc = inflate(&z, Z_NO_FLUSH);
        len += room - z.avail_out;
        size_t consumed = (size_t)(next - in) - z.avail_in;
        if (rc == Z_STREAM_END) {
            if (consumed == n)
                break;
            if (n - consumed >= 2 && in[consumed] == 0x1f && in[consumed + 1] == 0x8b) {
                inflateReset(&z); /* another gzip member follows */
                continue;
            }
            ok = rd_fail(r, TOP, consumed,
                         "%zu unexpected bytes after the end of the compressed stream",
                         n - consumed);
        } else if (rc == Z_OK) {
            continue;
        } else if (rc == Z_BUF_ERROR) {
            if (z.avail_out == 0)
                continue; /* needs more room */
            ok = rd_fail(r, TOP, consumed,
                         "truncated compressed data: the input ends before the end of the stream");
        } else if (rc == Z_NEED_DICT) {
            ok = rd_fail(r, TOP, consumed, "the compressed data needs a preset dictionary");
        } else if (rc == Z_MEM_ERROR) {
            r->nomem = true;
            ok = rd_fail(r, TOP, consumed, "out of memory in zlib");
        } else {
            ok = rd_fail(r, TOP, consumed, "corrupt compressed data: %s",
                         z.msg ? z.msg : "zlib error");
        }
    }
    if (ok && len > max)
        ok = bomb(r, n, max);
    inflateEnd(&z);
    if (!ok) {
        free(buf);
        return false;
    }
    *out = buf;
    *out_len = len;
    return true;
}

static bool rd_parse(struct rd *r)
{
    struct hs_pprof *p = r->p;
    size_t counts[15] = {0}, str_bytes = 0;
    if (!rd_scan(r, counts, &str_bytes))
        return false;
    if (counts[6] == 0)
        return rd_fail(r, TOP, r->n, "no string table (entry 0 must be \"\")");
    if (str_bytes + counts[6] < str_bytes || str_bytes + counts[6] > UINT32_MAX ||
        counts[6] > UINT32_MAX)
        return rd_fail(r, TOP, 0, "the string table is too big");
    if (!RESERVE(p, p->sdata, p->scap, str_bytes + counts[6]) ||
        !RESERVE(p, p->soff, p->soff_cap, counts[6]) ||
        !RESERVE(p, p->stypes, p->stypes_cap, counts[1]) ||
        !RESERVE(p, p->samples, p->samples_cap, counts[2]) ||
        !RESERVE(p, p->maps, p->maps_cap, counts[3]) ||
        !RESERVE(p, p->locs, p->locs_cap, counts[4]) ||
        !RESERVE(p, p->funcs, p->funcs_cap, counts[5]))
        return rd_nomem(r, TOP, 0);
    if (!rd_pass(r, 'B') || !rd_pass(r, 'C') || !rd_pass(r, 'D'))
        return false;
    p->nstypes = counts[1]; /* samples check their value counts against it */
    if (counts[1] > 0)
        memset(p->stypes, 0, counts[1] * sizeof(*p->stypes));
    return rd_pass(r, 'E');
}

static bool is_gzip(const uint8_t *b, size_t n)
{
    return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* A zlib header with a 32 KiB window and no dictionary. 0x78 would be field 15, varint, in
 * a raw profile, which has no field 15. */
static bool is_zlib(const uint8_t *b, size_t n)
{
    return n >= 2 && b[0] == 0x78 && (0x7800u | b[1]) % 31 == 0 && !(b[1] & 0x20);
}

int hs_pprof_read_ex(const void *data, size_t len, size_t max_decoded, size_t max_memory,
                     struct hs_pprof **out, char *err, size_t err_cap)
{
    struct rd r = {.b = data, .n = len, .offsets_in = "", .err = err, .err_cap = err_cap};
    if (err_cap > 0 && err)
        err[0] = '\0';
    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    *out = NULL;
    if (max_decoded == 0)
        max_decoded = HS_PPROF_MAX_DECODED;
    if (max_decoded > SIZE_MAX / 4)
        max_decoded = SIZE_MAX / 4; /* the buffer arithmetic needs room above it */
    if (max_memory == 0)
        max_memory = HS_PPROF_MAX_MEMORY;
    if (data == NULL || len == 0) {
        rd_fail(&r, TOP, 0, "empty input");
        errno = EINVAL;
        return -1;
    }
    uint8_t *decoded = NULL;
    if (is_gzip(data, len) || is_zlib(data, len)) {
        size_t dlen = 0;
        r.offsets_in = " of the compressed input";
        if (!rd_inflate(&r, data, len, max_decoded, &decoded, &dlen)) {
            errno = r.nomem ? ENOMEM : EINVAL;
            return -1;
        }
        r.b = decoded;
        r.n = dlen;
        r.offsets_in = " of the decompressed data";
        if (dlen == 0) {
            free(decoded);
            rd_fail(&r, TOP, 0, "empty input (after decompression)");
            errno = EINVAL;
            return -1;
        }
    }
    struct hs_pprof *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        free(decoded);
        rd_fail(&r, TOP, 0, "out of memory");
        errno = ENOMEM;
        return -1;
    }
    p->read_only = true;
    p->mem_limit = max_memory;
    maps_init(p);
    r.p = p;
    bool ok = rd_parse(&r);
    free(decoded);
    if (!ok) {
        hs_pprof_free(p);
        errno = r.nomem ? ENOMEM : EINVAL;
        return -1;
    }
    *out = p;
    return 0;
}

int hs_pprof_read(const void *data, size_t len, struct hs_pprof **out, char *err, size_t err_cap)
{
    return hs_pprof_read_ex(data, len, 0, 0, out, err, err_cap);
}

/* ---- Accessors ---- */

size_t hs_pprof_num_sample_types(const struct hs_pprof *p)
{
    return p->nstypes;
}

static struct hs_pprof_value_type vt_view(const struct hs_pprof *p, const struct pp_vt *vt)
{
    return (struct hs_pprof_value_type){str_at(p, vt->type), str_at(p, vt->unit)};
}

struct hs_pprof_value_type hs_pprof_sample_type_at(const struct hs_pprof *p, size_t i)
{
    if (i >= p->nstypes)
        return (struct hs_pprof_value_type){"", ""};
    return vt_view(p, &p->stypes[i]);
}

const char *hs_pprof_default_sample_type(const struct hs_pprof *p)
{
    return str_at(p, p->default_st);
}

struct hs_pprof_value_type hs_pprof_period_type(const struct hs_pprof *p)
{
    return vt_view(p, &p->period_type);
}

int64_t hs_pprof_period(const struct hs_pprof *p)
{
    return p->period;
}

int64_t hs_pprof_time_nanos(const struct hs_pprof *p)
{
    return p->time_nanos;
}

int64_t hs_pprof_duration_nanos(const struct hs_pprof *p)
{
    return p->duration_nanos;
}

const char *hs_pprof_drop_frames(const struct hs_pprof *p)
{
    return str_at(p, p->drop_frames);
}

const char *hs_pprof_keep_frames(const struct hs_pprof *p)
{
    return str_at(p, p->keep_frames);
}

size_t hs_pprof_num_comments(const struct hs_pprof *p)
{
    return p->ncomments;
}

const char *hs_pprof_comment_at(const struct hs_pprof *p, size_t i)
{
    return i < p->ncomments ? str_at(p, p->comments[i]) : "";
}

size_t hs_pprof_num_strings(const struct hs_pprof *p)
{
    return p->nstr;
}

const char *hs_pprof_string_at(const struct hs_pprof *p, size_t i)
{
    return str_at(p, i);
}

size_t hs_pprof_num_samples(const struct hs_pprof *p)
{
    return p->nsamples;
}

struct hs_pprof_sample_view hs_pprof_sample_at(const struct hs_pprof *p, size_t i)
{
    if (i >= p->nsamples)
        return (struct hs_pprof_sample_view){0};
    const struct pp_sample *s = &p->samples[i];
    return (struct hs_pprof_sample_view){
        .location_ids = p->locids ? p->locids + s->loc_off : NULL,
        .num_locations = s->nloc,
        .values = p->vals ? (const int64_t *)(p->vals + s->val_off) : NULL,
        .num_values = s->nval,
        .num_labels = s->nlab,
    };
}

struct hs_pprof_label hs_pprof_sample_label_at(const struct hs_pprof *p, size_t sample,
                                               size_t label)
{
    if (sample >= p->nsamples || label >= p->samples[sample].nlab)
        return (struct hs_pprof_label){"", "", 0, ""};
    const struct pp_label *l = &p->labels[p->samples[sample].lab_off + label];
    return (struct hs_pprof_label){str_at(p, l->key), str_at(p, l->str), l->num,
                                   str_at(p, l->num_unit)};
}

size_t hs_pprof_num_locations(const struct hs_pprof *p)
{
    return p->nlocs;
}

struct hs_pprof_location_view hs_pprof_location_at(const struct hs_pprof *p, size_t i)
{
    if (i >= p->nlocs)
        return (struct hs_pprof_location_view){0};
    const struct pp_location *l = &p->locs[i];
    return (struct hs_pprof_location_view){
        .id = l->id,
        .mapping_id = l->mapping_id,
        .address = l->address,
        .lines = p->lines ? p->lines + l->line_off : NULL,
        .num_lines = l->nlines,
        .is_folded = l->folded,
    };
}

/* The index of the entry with this id: index + 1 in a built profile, the id map in a read one. */
static size_t id_index(const struct hs_pprof *p, const struct pp_map *m, pp_eq_fn eq, size_t n,
                       uint64_t id)
{
    if (!p->read_only)
        return id >= 1 && id <= n ? (size_t)(id - 1) : HS_PPROF_NONE;
    return id == 0 ? HS_PPROF_NONE : map_find(p, m, id_hash(id), eq, &id);
}

size_t hs_pprof_location_index(const struct hs_pprof *p, uint64_t id)
{
    return id_index(p, &p->loc_ids, id_eq_location, p->nlocs, id);
}

size_t hs_pprof_num_functions(const struct hs_pprof *p)
{
    return p->nfuncs;
}

struct hs_pprof_function_view hs_pprof_function_at(const struct hs_pprof *p, size_t i)
{
    if (i >= p->nfuncs)
        return (struct hs_pprof_function_view){0, "", "", "", 0};
    const struct pp_function *f = &p->funcs[i];
    return (struct hs_pprof_function_view){f->id, str_at(p, f->name), str_at(p, f->system_name),
                                           str_at(p, f->filename), f->start_line};
}

size_t hs_pprof_function_index(const struct hs_pprof *p, uint64_t id)
{
    return id_index(p, &p->func_ids, id_eq_function, p->nfuncs, id);
}

size_t hs_pprof_num_mappings(const struct hs_pprof *p)
{
    return p->nmaps;
}

struct hs_pprof_mapping_view hs_pprof_mapping_at(const struct hs_pprof *p, size_t i)
{
    if (i >= p->nmaps)
        return (struct hs_pprof_mapping_view){.filename = "", .build_id = ""};
    const struct pp_mapping *m = &p->maps[i];
    return (struct hs_pprof_mapping_view){
        .id = m->id,
        .start = m->start,
        .limit = m->limit,
        .offset = m->offset,
        .filename = str_at(p, m->filename),
        .build_id = str_at(p, m->build_id),
        .has_functions = m->has_functions,
        .has_filenames = m->has_filenames,
        .has_line_numbers = m->has_line_numbers,
        .has_inline_frames = m->has_inline_frames,
    };
}

size_t hs_pprof_mapping_index(const struct hs_pprof *p, uint64_t id)
{
    return id_index(p, &p->map_ids, id_eq_mapping, p->nmaps, id);
}
