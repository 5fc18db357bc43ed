/* text_report.c: the text report and folded stacks of `heapscope report` (see outputs.h). */
#include "outputs.h"

#include <errno.h>
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const value_names[HS_FG_VALUES] = {"in-use bytes", "in-use allocations",
                                                      "allocated bytes", "allocations"};

/* The value that ranks: the delta in a diff. */
static int64_t value_of(const struct hs_rep_profile *p, const int64_t *values, const int64_t *base,
                        int v)
{
    return p->diff ? values[v] - base[v] : values[v];
}

static void format_number(char *buf, size_t cap, int64_t v, bool sign)
{
    char digits[32];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, mag);
    size_t len = 0;
    if (v < 0 || sign)
        buf[len++] = v < 0 ? '-' : '+';
    for (int i = 0; i < n && len + 2 < cap; i++) {
        buf[len++] = digits[i];
        if ((n - i - 1) % 3 == 0 && i != n - 1)
            buf[len++] = ',';
    }
    buf[len] = '\0';
}

static double percent(int64_t part, int64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

struct ranked {
    size_t index;
    int64_t key;
    const char *name; /* ties are ordered by name (NULL: by index) */
};

static int by_key_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    int64_t kx = x->key < 0 ? -x->key : x->key, ky = y->key < 0 ? -y->key : y->key;
    if (kx != ky)
        return kx > ky ? -1 : 1;
    if (x->name && y->name)
        return strcmp(x->name, y->name);
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Per-function self and total values, keyed by the frame label. */
struct fn_stat {
    const char *label;
    int64_t self[HS_FG_VALUES], self_base[HS_FG_VALUES];
    int64_t total[HS_FG_VALUES], total_base[HS_FG_VALUES];
    size_t seen_in_stack; /* stack index + 1 of the last stack counted in total */
};

/* Labels are interned: the table compares pointers. */
typedef const char *label_ref;

static uint64_t fn_key_hash(const label_ref *label, const void *ctx)
{
    (void)ctx;
    return (uintptr_t)*label;
}
static uint64_t fn_entry_hash(const struct fn_stat *e, const void *ctx)
{
    return fn_key_hash(&e->label, ctx);
}
static bool fn_matches(const struct fn_stat *e, const label_ref *label, const void *ctx)
{
    (void)ctx;
    return e->label == *label;
}
static bool fn_is_empty(const struct fn_stat *e)
{
    return e->label == NULL;
}
static void fn_clear(struct fn_stat *e)
{
    e->label = NULL;
}

HS_HASH_TABLE_DEFINE(fn_table, struct fn_stat, label_ref, fn_key_hash, fn_entry_hash, fn_matches,
                     fn_is_empty, fn_clear)

/* The entry of label, added when new; NULL when memory ran out. */
static struct fn_stat *fn_find(struct fn_table *t, const char *label)
{
    bool inserted;
    struct fn_stat *s = fn_table_find_or_insert(t, &label, &inserted);
    if (!s)
        return NULL;
    if (inserted)
        *s = (struct fn_stat){.label = label};
    return s;
}

static void add_values(int64_t *dst, const int64_t *src)
{
    for (int v = 0; v < HS_FG_VALUES; v++)
        dst[v] += src[v];
}

/* Returns 0, or -1 with errno ENOMEM. */
static int print_function_table(FILE *out, struct hs_rep_profile *p, const struct fn_table *table,
                                bool self, const struct hs_rep_output_options *o)
{
    const struct fn_stat *stats = table->slots;
    size_t cap = table->cap, n = table->count;
    struct ranked *r = malloc((n ? n : 1) * sizeof(*r));
    if (!r)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < cap; i++) {
        if (!stats[i].label)
            continue;
        const int64_t *v = self ? stats[i].self : stats[i].total;
        const int64_t *b = self ? stats[i].self_base : stats[i].total_base;
        r[k++] = (struct ranked){i, value_of(p, v, b, o->value), stats[i].label};
    }
    qsort(r, k, sizeof(*r), by_key_desc);
    int count_value = o->value | 1; /* the count that goes with the ranked value */
    int bytes_value = o->value & ~1;
    size_t shown = 0;
    while (shown < k && shown < o->top && r[shown].key != 0)
        shown++;
    fprintf(out, "\nTop %zu functions by %s %s%s:\n", shown, self ? "self" : "total",
            value_names[o->value],
            self ? " (the function that called the allocator)" : " (with everything they call)");
    fprintf(out, "  %14s %7s %12s  %s\n", "bytes", "%", "count", "function");
    for (size_t i = 0; i < shown; i++) {
        const struct fn_stat *s = &stats[r[i].index];
        const int64_t *v = self ? s->self : s->total;
        const int64_t *b = self ? s->self_base : s->total_base;
        char bytes[40], count[40];
        format_number(bytes, sizeof(bytes), value_of(p, v, b, bytes_value), p->diff);
        format_number(count, sizeof(count), value_of(p, v, b, count_value), p->diff);
        int64_t whole = p->diff ? p->base_totals[bytes_value] : p->totals[bytes_value];
        fprintf(out, "  %14s %6.1f%% %12s  %s\n", bytes,
                percent(value_of(p, v, b, bytes_value), whole), count, s->label);
    }
    free(r);
    return 0;
}

int hs_rep_write_text(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o)
{
    int bytes_value = o->value & ~1, count_value = o->value | 1;
    char bytes[40], count[40];
    fprintf(out, "heapscope report: %s\n", o->title);
    if (o->header && o->header[0])
        fprintf(out, "  %s\n", o->header);
    format_number(bytes, sizeof(bytes), p->totals[bytes_value], false);
    format_number(count, sizeof(count), p->totals[count_value], false);
    fprintf(out, "  %s: %s bytes in %s allocations, %zu call stacks\n",
            bytes_value == HS_FG_INUSE_BYTES ? "In use" : "Allocated", bytes, count, p->num_stacks);
    if (p->diff) {
        format_number(bytes, sizeof(bytes), p->totals[bytes_value] - p->base_totals[bytes_value],
                      true);
        format_number(count, sizeof(count), p->totals[count_value] - p->base_totals[count_value],
                      true);
        fprintf(out, "  Change against the base: %s bytes, %s allocations (what grew first)\n",
                bytes, count);
    }

    /* Top call stacks. */
    struct ranked *r = malloc((p->num_stacks ? p->num_stacks : 1) * sizeof(*r));
    if (!r)
        return -1;
    for (size_t i = 0; i < p->num_stacks; i++)
        r[i] =
            (struct ranked){i, value_of(p, p->stacks[i].values, p->stacks[i].base, o->value), NULL};
    qsort(r, p->num_stacks, sizeof(*r), by_key_desc);
    size_t shown = 0;
    while (shown < p->num_stacks && shown < o->top && r[shown].key != 0)
        shown++;
    fprintf(out, "\nTop %zu call stacks by %s%s:\n", shown, value_names[o->value],
            p->diff ? " (change)" : "");
    for (size_t i = 0; i < shown; i++) {
        const struct hs_rep_stack *st = &p->stacks[r[i].index];
        format_number(bytes, sizeof(bytes), value_of(p, st->values, st->base, bytes_value),
                      p->diff);
        format_number(count, sizeof(count), value_of(p, st->values, st->base, count_value),
                      p->diff);
        int64_t whole = p->diff ? p->base_totals[bytes_value] : p->totals[bytes_value];
        fprintf(out, "  #%zu  %s bytes (%.1f%%) in %s allocations\n", i + 1, bytes,
                percent(value_of(p, st->values, st->base, bytes_value), whole), count);
        for (size_t l = 0; l < st->depth; l++) {
            const struct hs_rep_location *loc = &p->locations[st->locations[l]];
            for (size_t f = 0; f < loc->num_frames; f++) {
                const struct hs_rep_frame *fr = &p->frames[loc->first_frame + f];
                const char *obj = strrchr(loc->map, '/');
                const char *label = hs_rep_frame_label(p, fr);
                if (!label) {
                    free(r);
                    return -1;
                }
                fprintf(out, "        %s%s  [%s]\n", label, fr->inlined ? "  (inlined)" : "",
                        obj ? obj + 1 : loc->map);
            }
        }
    }
    free(r);

    /* Functions: self = the innermost frame of the first location; total = every function
     * on the stack, once per stack. */
    struct fn_table stats;
    fn_table_init(&stats, &hs_table_libc, NULL, 50);
    for (size_t i = 0; i < p->num_stacks; i++) {
        const struct hs_rep_stack *st = &p->stacks[i];
        for (size_t l = 0; l < st->depth; l++) {
            const struct hs_rep_location *loc = &p->locations[st->locations[l]];
            for (size_t f = 0; f < loc->num_frames; f++) {
                const char *label = hs_rep_frame_label(p, &p->frames[loc->first_frame + f]);
                struct fn_stat *s = label ? fn_find(&stats, label) : NULL;
                if (!s) {
                    fn_table_destroy(&stats);
                    errno = ENOMEM;
                    return -1;
                }
                if (l == 0 && f == 0) {
                    add_values(s->self, st->values);
                    add_values(s->self_base, st->base);
                }
                if (s->seen_in_stack != i + 1) {
                    s->seen_in_stack = i + 1;
                    add_values(s->total, st->values);
                    add_values(s->total_base, st->base);
                }
            }
        }
    }
    int rc = print_function_table(out, p, &stats, true, o);
    if (rc == 0)
        rc = print_function_table(out, p, &stats, false, o);
    fn_table_destroy(&stats);
    return rc != 0 || ferror(out) ? -1 : 0;
}

/* Puts the labels of a stack, root first, in *labels (*cap entries, grown as needed); returns
 * how many, or SIZE_MAX (errno ENOMEM) when memory ran out. */
static size_t stack_labels(struct hs_rep_profile *p, const struct hs_rep_stack *st,
                           const char ***labels, size_t *cap)
{
    size_t n = 0;
    for (size_t l = st->depth; l-- > 0;) {
        const struct hs_rep_location *loc = &p->locations[st->locations[l]];
        for (size_t f = loc->num_frames; f-- > 0;) {
            if (n == *cap) {
                size_t c = *cap ? *cap * 2 : 64;
                const char **grown = realloc(*labels, c * sizeof(**labels));
                if (!grown)
                    return SIZE_MAX;
                *labels = grown;
                *cap = c;
            }
            (*labels)[n] = hs_rep_frame_label(p, &p->frames[loc->first_frame + f]);
            if (!(*labels)[n++])
                return SIZE_MAX;
        }
    }
    return n;
}

int hs_rep_write_folded(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o)
{
    const char **labels = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < p->num_stacks; i++) {
        const struct hs_rep_stack *st = &p->stacks[i];
        int64_t v = st->values[o->value], before = st->base[o->value];
        if (v == 0 && (!p->diff || before == 0))
            continue;
        size_t n = stack_labels(p, st, &labels, &cap);
        if (n == SIZE_MAX) {
            free(labels);
            return -1;
        }
        for (size_t k = 0; k < n; k++) {
            /* ';' separates frames in the folded format: keep it out of the names. */
            for (const char *c = labels[k]; *c; c++)
                fputc(*c == ';' ? ':' : *c, out);
            fputc(k + 1 < n ? ';' : ' ', out);
        }
        if (n == 0)
            fputs("[no backtrace] ", out);
        /* A diff is two columns, before and after, as difffolded.pl writes them: what
         * flamegraph.pl draws (widths after, colours by the change); a signed delta would be
         * a line it drops. */
        if (p->diff)
            fprintf(out, "%" PRId64 " ", before);
        fprintf(out, "%" PRId64 "\n", v);
    }
    free(labels);
    return ferror(out) ? -1 : 0;
}

int hs_rep_write_html(FILE *out, struct hs_rep_profile *p, const struct hs_rep_output_options *o)
{
    /* The subtitle: the input's description, whole (a profiler's comments run long), one
     * line of it per line, then the totals. */
    char bytes[40], count[40];
    format_number(bytes, sizeof(bytes), p->totals[HS_FG_INUSE_BYTES], false);
    format_number(count, sizeof(count), p->totals[HS_FG_INUSE_COUNT], false);
    char *subtitle = NULL;
    size_t subtitle_len = 0;
    FILE *sub = open_memstream(&subtitle, &subtitle_len);
    if (!sub)
        return -1;
    if (o->header && o->header[0])
        fprintf(sub, "%s\n", o->header);
    fprintf(sub, "%s bytes in use in %s allocations%s", bytes, count,
            p->diff ? " (colours: change against the base)" : "");
    if (fclose(sub) != 0) {
        free(subtitle);
        return -1;
    }
    struct hs_fg_stack *stacks = calloc(p->num_stacks ? p->num_stacks : 1, sizeof(*stacks));
    const char ***frames = calloc(p->num_stacks ? p->num_stacks : 1, sizeof(*frames));
    if (!stacks || !frames) {
        free(stacks);
        free(frames);
        free(subtitle);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->num_stacks; i++) {
        size_t cap = 0;
        const char **labels = NULL;
        size_t n = stack_labels(p, &p->stacks[i], &labels, &cap);
        frames[i] = labels;
        if (n == SIZE_MAX) {
            rc = -1;
            break;
        }
        stacks[i].frames = labels;
        stacks[i].depth = n;
        memcpy(stacks[i].values, p->stacks[i].values, sizeof(stacks[i].values));
        memcpy(stacks[i].base, p->stacks[i].base, sizeof(stacks[i].base));
    }
    struct hs_fg_input in = {.title = o->title,
                             .subtitle = subtitle,
                             .stacks = stacks,
                             .num_stacks = p->num_stacks,
                             .has_alloc = p->has_alloc,
                             .diff = p->diff,
                             .value = o->value};
    if (rc == 0)
        rc = hs_flamegraph_write_html(out, &in);
    int saved = errno;
    for (size_t i = 0; i < p->num_stacks; i++)
        free(frames[i]);
    free(frames);
    free(stacks);
    free(subtitle);
    errno = saved;
    return rc;
}
