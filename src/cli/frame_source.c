/* frame_source.c: see frame_source.h. */
#define _GNU_SOURCE
#include "frame_source.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define HS_FRAME_SOURCE_BASE ((uintptr_t)1 << 44)
#define MODULE_SPAN ((uintptr_t)1 << 36)
#define MAX_MODULES 4096 /* 2^44 + 4096 * 2^36 stays below 2^48 */

struct module {
    char *path;
    uintptr_t base;
    uintptr_t bias; /* base - rel_pc of base: rel_pc + bias is the address to look up */
    bool usable;
};

struct hs_frame_source {
    struct hs_symbolizer *sym;
    struct module *modules;
    size_t count, cap;
    size_t last; /* the module of the previous lookup: frames come in runs of one module */
};

struct hs_frame_source *hs_frame_source_new(void)
{
    struct hs_frame_source *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return NULL;
    fs->sym = hs_symbolizer_new(NULL);
    if (!fs->sym) {
        free(fs);
        return NULL;
    }
    return fs;
}

void hs_frame_source_free(struct hs_frame_source *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; i < fs->count; i++)
        free(fs->modules[i].path);
    free(fs->modules);
    hs_symbolizer_free(fs->sym);
    free(fs);
}

/* The module of path, declared on first use; NULL when it cannot be (too many, memory). */
static struct module *module_of(struct hs_frame_source *fs, const char *path, size_t len)
{
    if (fs->last < fs->count && strlen(fs->modules[fs->last].path) == len &&
        memcmp(fs->modules[fs->last].path, path, len) == 0)
        return &fs->modules[fs->last];
    for (size_t i = 0; i < fs->count; i++)
        if (strlen(fs->modules[i].path) == len && memcmp(fs->modules[i].path, path, len) == 0) {
            fs->last = i;
            return &fs->modules[i];
        }
    if (fs->count == MAX_MODULES || len >= PATH_MAX)
        return NULL;
    if (fs->count == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 16;
        struct module *m = realloc(fs->modules, cap * sizeof(*m));
        if (!m)
            return NULL;
        fs->modules = m;
        fs->cap = cap;
    }
    struct module *m = &fs->modules[fs->count];
    m->path = strndup(path, len);
    if (!m->path)
        return NULL;
    m->base = HS_FRAME_SOURCE_BASE + fs->count * MODULE_SPAN;
    m->usable = false;
    m->bias = 0;
    fs->last = fs->count++;
    if (hs_symbolizer_add_map(fs->sym, m->base, m->base + MODULE_SPAN, 0, m->path) == 0) {
        struct hs_frame_info probe;
        if (hs_symbolize(fs->sym, m->base, 0, &probe, 1) == 1 && probe.rel_pc <= m->base) {
            m->bias = m->base - probe.rel_pc;
            m->usable = true;
        }
    }
    return m;
}

size_t hs_frame_source_lookup(struct hs_frame_source *fs, const struct hs_frame_line *fl,
                              struct hs_frame_info *out, size_t max)
{
    if (fl->deleted || fl->path[0] != '/')
        return 0;
    struct module *m = module_of(fs, fl->path, fl->path_len);
    if (!m || !m->usable || fl->rel_pc >= MODULE_SPAN)
        return 0;
    uintptr_t pc = (uintptr_t)fl->rel_pc + m->bias;
    if (pc < m->base || pc >= m->base + MODULE_SPAN)
        return 0;
    size_t n = hs_symbolize(fs->sym, pc, 0, out, max);
    /* Nothing known at all: no function and no line anywhere in the chain. */
    bool known = false;
    for (size_t i = 0; i < n; i++)
        known |= out[i].line != 0;
    return known ? n : 0;
}
