/* profile_writer.c: the profiler daemon's output (see profile_writer.h).
 *
 * pprof. The callsites of the heap come from hs_tracker_foreach (in-use values now or at the
 * peak), each one sample whose four values are rounded to the nearest integer (half away
 * from zero, like llround, clamped to int64; NaN gives 0); callsites whose four rounded
 * values are all 0 are left out. Mappings: the maps text is parsed once into a table sorted
 * by address; a maps line gets a pprof mapping (start, limit, file offset, path, and the
 * build id the symbolizer reported for the first pc met in it) the first time a pc of the
 * profile falls into it, so the profile has one mapping per maps line holding a pc. A
 * mapping's has_functions, has_filenames, has_line_numbers and has_inline_frames are set when
 * any pc in it got a function name, a file, a line number or inlined frames.
 *
 * Locations: one per distinct absolute pc, found through a hash map pc -> location id, so
 * each pc is symbolized once per dump. The pcs are the unwinder's: the innermost frame's and
 * a frame interrupted by a signal exact, the others call sites (return address - 1, inside
 * the call instruction, what profile.proto's Location.address means), so every pc is
 * symbolized, and its mapping found, at the pc itself. Its lines are the symbolizer's
 * frames, innermost inlined function first: function name = demangled name, system name =
 * the symbol as stored, file name = source file, line number = source line.
 * A pc the symbolizer knows nothing about (function "") gets no lines, so that pprof tools
 * show its address. The address is the pc as the unwinder returned it (a call site for outer
 * frames), so that pprof symbolizing it itself names the same line.
 *
 * Android. The live blocks (hs_tracker_foreach_live) are grouped by (stack, size): stacks
 * are interned in a pool with a hash map, so a block costs one lookup and no copy of its
 * frames; the blocks are sorted like malloc debug's snapshot (size descending, then the
 * deeper stack first, then frames in ascending order) and merged. A record's count is the
 * sum of its blocks' estimated objects rounded to nearest, at least 1; "Total memory" is
 * the sum of size * count (saturating), "Backtrace size" the deepest stack written. The
 * header lines and the record lines are written as malloc debug's heap_dump.c writes them,
 * with an empty build fingerprint; the maps text follows verbatim (a newline added if it
 * does not end with one; nothing when there is none), then END.
 */
#define _GNU_SOURCE
#include "profile_writer.h"

#include "hash.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "perf_map.h"
#include "pprof.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "sort.h"
#include "symbolizer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Nearest integer, halves away from zero; clamped to int64; NaN gives 0. */
static int64_t round_i64(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    int64_t i = (int64_t)v; /* toward zero; v - i is exact */
    double frac = v - (double)i;
    if (frac >= 0.5)
        i++;
    else if (frac <= -0.5)
        i--;
    return i;
}

/* Sets errno from the stream's state after a flush; returns 0 when all went well. */
static int stream_status(FILE *out)
{
    errno = 0;
    int flushed = fflush(out);
    int e = errno;
    if (flushed != 0 || ferror(out)) {
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

/* ---- Maps table --------------------------------------------------------------------------- */

struct wmap {
    uintptr_t start, end;
    uint64_t offset;
    char *path;
    uint64_t id; /* pprof mapping id, 0 until a pc falls into it */
    bool has_functions, has_filenames, has_lines, has_inline;
};

struct maps_table {
    struct wmap *v;
    size_t n, cap;
    bool failed;
};

static int collect_map(const struct hs_map *m, void *arg)
{
    struct maps_table *mt = arg;
    if (mt->n == mt->cap) {
        size_t cap = mt->cap ? mt->cap * 2 : 64;
        struct wmap *v = realloc(mt->v, cap * sizeof(*v));
        if (!v) {
            mt->failed = true;
            return 1;
        }
        mt->v = v;
        mt->cap = cap;
    }
    char *path = strdup(m->path);
    if (!path) {
        mt->failed = true;
        return 1;
    }
    mt->v[mt->n++] =
        (struct wmap){.start = m->start, .end = m->end, .offset = m->offset, .path = path};
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const struct wmap *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void maps_free(struct maps_table *mt)
{
    for (size_t i = 0; i < mt->n; i++)
        free(mt->v[i].path);
    free(mt->v);
    memset(mt, 0, sizeof(*mt));
}

/* Parses the maps text into mt, sorted by address. Returns 0, or -1 (ENOMEM). */
static int maps_load(struct maps_table *mt, const char *text, size_t len)
{
    memset(mt, 0, sizeof(*mt));
    if (!text || len == 0)
        return 0;
    struct hs_map *scratch = malloc(sizeof(*scratch));
    if (!scratch)
        return -1;
    struct hs_maps_parser parser;
    hs_maps_parser_init(&parser, scratch);
    if (hs_maps_parser_feed(&parser, text, len, collect_map, mt) == 0)
        hs_maps_parser_finish(&parser, collect_map, mt);
    free(scratch);
    if (mt->failed) {
        maps_free(mt);
        return -1;
    }
    if (mt->n > 1)
        qsort(mt->v, mt->n, sizeof(*mt->v), by_start);
    return 0;
}

/* The mapping holding addr, or NULL. */
static struct wmap *maps_find(struct maps_table *mt, uintptr_t addr)
{
    size_t i = hs_range_find(mt->v, mt->n, addr, start, end);
    return i < mt->n ? &mt->v[i] : NULL;
}

/* ---- pprof ------------------------------------------------------------------------------ */

struct loc_slot {
    uintptr_t pc;
    uint64_t id; /* 0: empty slot */
};

static uint64_t pc_hash(const uintptr_t *pc, const void *ctx)
{
    (void)ctx;
    return *pc;
}
static uint64_t loc_hash(const struct loc_slot *l, const void *ctx)
{
    return pc_hash(&l->pc, ctx);
}
static bool loc_matches(const struct loc_slot *l, const uintptr_t *pc, const void *ctx)
{
    (void)ctx;
    return l->pc == *pc;
}
static bool loc_is_empty(const struct loc_slot *l)
{
    return l->id == 0;
}
static void loc_clear(struct loc_slot *l)
{
    l->id = 0;
}

/* pc -> pprof location id (hash_table.h). */
HS_HASH_TABLE_DEFINE(loc_table, struct loc_slot, uintptr_t, pc_hash, loc_hash, loc_matches,
                     loc_is_empty, loc_clear)

struct pprof_ctx {
    struct hs_pprof *p;
    struct hs_symbolizer *sym;
    const struct hs_perf_map *perf_map;
    struct maps_table maps;
    struct loc_table locs;
    int err; /* errno of the first failure */
    struct hs_frame_info frames[HS_SYMBOLIZE_MAX_FRAMES];
    struct hs_pprof_line lines[HS_SYMBOLIZE_MAX_FRAMES];
};

static int ctx_fail(struct pprof_ctx *c)
{
    if (!c->err)
        c->err = hs_pprof_error(c->p) ? hs_pprof_error(c->p) : ENOMEM;
    return 1;
}

/* The location of pc, made (and pc symbolized) the first time; 0 on failure. pcs are call
 * sites or exact (hs_unwind): each is looked up as it is. */
static uint64_t location_of(struct pprof_ctx *c, uintptr_t pc)
{
    if (!loc_table_reserve(&c->locs, 1))
        return 0;
    const struct loc_slot *known = loc_table_find(&c->locs, &pc);
    if (known)
        return known->id;

    size_t nf = c->sym ? hs_symbolize(c->sym, pc, 0, c->frames, HS_SYMBOLIZE_MAX_FRAMES) : 0;
    struct wmap *m = maps_find(&c->maps, pc);
    uint64_t mapping_id = 0;
    if (m) {
        if (m->id == 0)
            m->id = hs_pprof_mapping(c->p, m->start, m->end, m->offset, m->path,
                                     nf > 0 ? c->frames[0].build_id : "");
        if (m->id == 0)
            return 0;
        mapping_id = m->id;
    }

    size_t nl = 0;
    if (nf > 0 && c->frames[0].function[0] != '\0') {
        for (size_t i = 0; i < nf; i++) {
            const struct hs_frame_info *f = &c->frames[i];
            uint64_t fid = hs_pprof_function(c->p, f->demangled, f->function, f->file);
            if (fid == 0)
                return 0;
            c->lines[i] = (struct hs_pprof_line){fid, (int64_t)f->line};
            if (m) {
                m->has_functions |= f->function[0] != '\0';
                m->has_filenames |= f->file[0] != '\0';
                m->has_lines |= f->line > 0;
            }
        }
        nl = nf;
        if (m && nf > 1)
            m->has_inline = true;
    } else {
        /* No ELF symbol: JIT code, named by the runtime's perf map if it writes one. */
        const char *jit = hs_perf_map_lookup(c->perf_map, pc);
        if (jit != NULL) {
            uint64_t fid = hs_pprof_function(c->p, jit, jit, "");
            if (fid == 0)
                return 0;
            c->lines[0] = (struct hs_pprof_line){fid, 0};
            nl = 1;
            if (m)
                m->has_functions = true;
        }
    }
    uint64_t id = hs_pprof_location(c->p, mapping_id, pc, c->lines, nl);
    if (id == 0)
        return 0;
    loc_table_put(&c->locs, &(struct loc_slot){pc, id});
    return id;
}

static int add_callsite(const uintptr_t *pcs, size_t n, const struct hs_callsite_values *v,
                        void *arg)
{
    struct pprof_ctx *c = arg;
    int64_t values[4] = {round_i64(v->alloc_objects), round_i64(v->alloc_bytes),
                         round_i64(v->inuse_objects), round_i64(v->inuse_bytes)};
    if (values[0] == 0 && values[1] == 0 && values[2] == 0 && values[3] == 0)
        return 0;
    uint64_t ids[HS_TRACKER_MAX_FRAMES];
    if (n > HS_TRACKER_MAX_FRAMES)
        n = HS_TRACKER_MAX_FRAMES;
    for (size_t i = 0; i < n; i++) {
        ids[i] = location_of(c, pcs[i]);
        if (ids[i] == 0)
            return ctx_fail(c);
    }
    hs_pprof_add_sample(c->p, ids, n, values);
    if (hs_pprof_error(c->p))
        return ctx_fail(c);
    return 0;
}

/* Adds each line of text as a comment. Returns false when out of memory. */
static bool add_comment_lines(struct hs_pprof *p, const char *text)
{
    char *copy = strdup(text);
    if (!copy)
        return false;
    for (char *line = copy; line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (nl || *line) /* no empty comment for the end of a final newline */
            hs_pprof_add_comment(p, line);
        line = nl ? nl + 1 : NULL;
    }
    free(copy);
    return true;
}

static int64_t clamp_i64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

int hs_profile_write_pprof(const struct hs_tracker *t, uint32_t heap, struct hs_symbolizer *sym,
                           const struct hs_profile_meta *meta, FILE *out)
{
    if (!t || !meta || !out || heap >= HS_TRACKER_MAX_HEAPS) {
        errno = EINVAL;
        return -1;
    }
    struct pprof_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        errno = ENOMEM;
        return -1;
    }
    c->sym = sym;
    c->perf_map = meta->perf_map;
    loc_table_init(&c->locs, &hs_table_libc, NULL, 50);
    c->p = hs_pprof_new();
    if (!c->p || maps_load(&c->maps, meta->maps, meta->maps_len) != 0) {
        hs_pprof_free(c->p);
        free(c);
        errno = ENOMEM;
        return -1;
    }
    struct hs_pprof *p = c->p;
    hs_pprof_add_sample_type(p, "alloc_objects", "count");
    hs_pprof_add_sample_type(p, "alloc_space", "bytes");
    hs_pprof_add_sample_type(p, "inuse_objects", "count");
    hs_pprof_add_sample_type(p, "inuse_space", "bytes");
    hs_pprof_set_default_sample_type(p, "inuse_space");
    hs_pprof_set_period(p, "space", "bytes", clamp_i64(meta->interval));
    hs_pprof_set_time(p, clamp_i64(meta->time_ns), clamp_i64(meta->duration_ns));

    const char *name = hs_tracker_heap_name(t, heap);
    char first[HS_TRACKER_HEAP_NAME_MAX + 64];
    snprintf(first, sizeof(first), "heapscope heapprofd: pid %d, heap %s", meta->pid,
             name ? name : "");
    hs_pprof_add_comment(p, first);
    if (meta->at_peak)
        hs_pprof_add_comment(p, "in use at the peak of sampled bytes");
    for (size_t i = 0; meta->comments && i < meta->num_comments && !c->err; i++)
        if (meta->comments[i] && !add_comment_lines(p, meta->comments[i]))
            c->err = ENOMEM;

    if (!c->err)
        hs_tracker_foreach(t, heap, meta->at_peak, add_callsite, c);
    for (size_t i = 0; i < c->maps.n; i++) {
        const struct wmap *m = &c->maps.v[i];
        if (m->id)
            hs_pprof_mapping_set_flags(p, m->id, m->has_functions, m->has_filenames, m->has_lines,
                                       m->has_inline);
    }

    int rc = 0;
    if (c->err) {
        errno = c->err;
        rc = -1;
    } else {
        rc = hs_pprof_write(p, out, true); /* errno set on failure */
    }
    int saved = errno;
    hs_pprof_free(p);
    maps_free(&c->maps);
    loc_table_destroy(&c->locs);
    free(c);
    errno = saved;
    return rc;
}

/* ---- Android native heap dump -------------------------------------------------------------- */

struct stack_ref {
    size_t off; /* into the frame pool */
    size_t n;
};

struct block_rec {
    uint32_t stack;
    uint64_t size;
    double objects;
    uint64_t num; /* once merged: the record's count */
};

struct android_ctx;
struct stack_key {
    const uintptr_t *pcs;
    size_t n;
};
static uint64_t stack_key_hash(const struct stack_key *k, const void *ctx);
static uint64_t stack_entry_hash(const uint32_t *s1, const void *ctx);
static bool stack_matches(const uint32_t *s1, const struct stack_key *k, const void *ctx);
static bool stack_is_empty(const uint32_t *s1)
{
    return *s1 == 0;
}
static void stack_clear(uint32_t *s1)
{
    *s1 = 0;
}
HS_HASH_TABLE_DEFINE(stack_table, uint32_t, struct stack_key, stack_key_hash, stack_entry_hash,
                     stack_matches, stack_is_empty, stack_clear)

struct android_ctx {
    uintptr_t *frames; /* pool of the distinct stacks' frames */
    size_t frames_len, frames_cap;
    struct stack_ref *stacks;
    size_t num_stacks, stacks_cap;
    struct stack_table map; /* the distinct stacks: stack index + 1 */
    struct block_rec *blocks;
    size_t num_blocks, blocks_cap;
    bool failed;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem, size_t min)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : min;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return false;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static bool same_stack(const struct android_ctx *c, uint32_t s, const uintptr_t *pcs, size_t n)
{
    const struct stack_ref *r = &c->stacks[s];
    return r->n == n && (n == 0 || memcmp(c->frames + r->off, pcs, n * sizeof(*pcs)) == 0);
}

static uint64_t stack_key_hash(const struct stack_key *k, const void *ctx)
{
    (void)ctx;
    return hs_hash_frames(k->pcs, k->n);
}
static uint64_t stack_entry_hash(const uint32_t *s1, const void *ctx)
{
    const struct android_ctx *c = ctx;
    const struct stack_ref *r = &c->stacks[*s1 - 1];
    return hs_hash_frames(c->frames + r->off, r->n);
}
static bool stack_matches(const uint32_t *s1, const struct stack_key *k, const void *ctx)
{
    return same_stack(ctx, *s1 - 1, k->pcs, k->n);
}

/* The index of the stack pcs[0..n), added if new; -1 when out of memory. */
static int64_t intern_stack(struct android_ctx *c, const uintptr_t *pcs, size_t n)
{
    if (!stack_table_reserve(&c->map, 1))
        return -1;
    const uint32_t *known = stack_table_find(&c->map, &(struct stack_key){pcs, n});
    if (known)
        return *known - 1;
    if (c->num_stacks >= UINT32_MAX - 1 ||
        !grow((void **)&c->stacks, &c->stacks_cap, c->num_stacks + 1, sizeof(*c->stacks), 256) ||
        !grow((void **)&c->frames, &c->frames_cap, c->frames_len + n, sizeof(*c->frames), 4096))
        return -1;
    if (n > 0)
        memcpy(c->frames + c->frames_len, pcs, n * sizeof(*pcs));
    c->stacks[c->num_stacks] = (struct stack_ref){c->frames_len, n};
    c->frames_len += n;
    stack_table_put(&c->map, &(uint32_t){(uint32_t)c->num_stacks + 1});
    return (int64_t)c->num_stacks++;
}

static int collect_block(const uintptr_t *pcs, size_t n, uint64_t size, double objects,
                         uint64_t sampled, void *arg)
{
    (void)sampled;
    struct android_ctx *c = arg;
    int64_t s = intern_stack(c, pcs, n);
    if (s < 0 ||
        !grow((void **)&c->blocks, &c->blocks_cap, c->num_blocks + 1, sizeof(*c->blocks), 1024)) {
        c->failed = true;
        return 1;
    }
    c->blocks[c->num_blocks++] = (struct block_rec){(uint32_t)s, size, objects, 0};
    return 0;
}

/* malloc debug's order: size descending, then the deeper stack, then frames ascending; equal
 * (size, stack) compare equal so that they end up next to each other. */
static int compare_blocks(const void *pa, const void *pb, void *arg)
{
    const struct android_ctx *c = arg;
    const struct block_rec *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->stack == b->stack)
        return 0;
    const struct stack_ref *x = &c->stacks[a->stack], *y = &c->stacks[b->stack];
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    for (size_t i = 0; i < x->n; i++) {
        uintptr_t u = c->frames[x->off + i], v = c->frames[y->off + i];
        if (u != v)
            return u < v ? -1 : 1;
    }
    return 0;
}

static void android_free(struct android_ctx *c)
{
    free(c->frames);
    free(c->stacks);
    stack_table_destroy(&c->map);
    free(c->blocks);
}

int hs_profile_write_android(const struct hs_tracker *t, uint32_t heap,
                             const struct hs_profile_meta *meta, FILE *out)
{
    if (!t || !meta || !out || heap >= HS_TRACKER_MAX_HEAPS) {
        errno = EINVAL;
        return -1;
    }
    struct android_ctx c;
    memset(&c, 0, sizeof(c));
    stack_table_init(&c.map, &hs_table_libc, &c, 50);
    hs_tracker_foreach_live(t, heap, collect_block, &c);
    if (c.failed) {
        android_free(&c);
        errno = ENOMEM;
        return -1;
    }
    hs_sort(c.blocks, c.num_blocks, sizeof(*c.blocks), compare_blocks, &c);

    /* Merge the runs of equal (size, stack) into records, in place. */
    size_t records = 0, depth = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < c.num_blocks;) {
        struct block_rec r = c.blocks[i];
        size_t j = i + 1;
        for (; j < c.num_blocks && c.blocks[j].size == r.size && c.blocks[j].stack == r.stack; j++)
            r.objects += c.blocks[j].objects;
        int64_t num = round_i64(r.objects);
        r.num = num < 1 ? 1 : (uint64_t)num;
        uint64_t bytes;
        if (__builtin_mul_overflow(r.size, r.num, &bytes) ||
            __builtin_add_overflow(total, bytes, &total))
            total = UINT64_MAX;
        if (c.stacks[r.stack].n > depth)
            depth = c.stacks[r.stack].n;
        c.blocks[records++] = r;
        i = j;
    }

    fputs("Android Native Heap Dump v1.2\n\n", out);
    fputs("Build fingerprint: ''\n\n", out);
    fprintf(out, "Total memory: %" PRIu64 "\n", total);
    fprintf(out, "Allocation records: %zu\n", records);
    fprintf(out, "Backtrace size: %zu\n\n", depth);
    for (size_t i = 0; i < records && !ferror(out); i++) {
        const struct block_rec *r = &c.blocks[i];
        const struct stack_ref *s = &c.stacks[r->stack];
        fprintf(out, "z 0  sz %8" PRIu64 "  num %4" PRIu64 "  bt", r->size, r->num);
        for (size_t f = 0; f < s->n; f++)
            fprintf(out, " %" PRIxPTR, c.frames[s->off + f]);
        fputc('\n', out);
    }
    fputs("MAPS\n", out);
    if (meta->maps && meta->maps_len > 0) {
        fwrite(meta->maps, 1, meta->maps_len, out);
        if (meta->maps[meta->maps_len - 1] != '\n')
            fputc('\n', out);
    }
    fputs("END\n", out);
    android_free(&c);
    return stream_status(out);
}
