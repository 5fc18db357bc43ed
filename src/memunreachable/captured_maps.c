/* captured_maps.c: see captured_maps.h. */
#include "captured_maps.h"

#include "proc_maps.h"
#include "range_lookup.h"

#include <errno.h>
#include <string.h>

struct load_ctx {
    struct hs_mu_maps *out;
    struct hs_arena *arena;
    bool oom;
};

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static enum hs_mu_map_kind kind_of(const char *p)
{
    if (p[0] == '\0')
        return HS_MU_MAP_ANON;
    if (p[0] == '[') {
        if (strcmp(p, "[heap]") == 0)
            return HS_MU_MAP_HEAP;
        if (starts_with(p, "[stack"))
            return HS_MU_MAP_STACK;
        if (starts_with(p, "[anon:") || starts_with(p, "[anon_shmem:"))
            return HS_MU_MAP_ANON;
        return HS_MU_MAP_PSEUDO;
    }
    if (starts_with(p, "anon_inode:"))
        return HS_MU_MAP_DEVICE;
    if (starts_with(p, "/dev/") && strcmp(p, "/dev/zero") != 0 && !starts_with(p, "/dev/shm/"))
        return HS_MU_MAP_DEVICE;
    return HS_MU_MAP_FILE;
}

/* glibc's C library: "libc.so.6", or "libc-2.31.so" and the like in older releases. */
static bool is_libc(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return starts_with(base, "libc.so") ||
           (starts_with(base, "libc-") && strstr(base, ".so") != NULL);
}

static int add_map(const struct hs_map *m, void *arg)
{
    struct load_ctx *c = arg;
    struct hs_mu_maps *o = c->out;
    if (m->end <= m->start)
        return 0;
    if (o->num == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 256;
        struct hs_mu_map *n = hs_arena_alloc(c->arena, ncap * sizeof(*n));
        if (!n) {
            c->oom = true;
            return 1;
        }
        if (o->maps) {
            memcpy(n, o->maps, o->num * sizeof(*n));
            hs_arena_free(c->arena, o->maps, o->cap * sizeof(*n));
        }
        o->maps = n;
        o->cap = ncap;
    }
    struct hs_mu_map *d = &o->maps[o->num++];
    d->start = m->start;
    d->end = m->end;
    d->load_base = m->load_base;
    d->inode = m->inode;
    d->dev = m->dev;
    d->perms = m->perms;
    d->kind = kind_of(m->path);
    d->thread_stack = false;
    d->libc = d->kind == HS_MU_MAP_FILE && is_libc(m->path);
    return 0;
}

int hs_mu_maps_load(struct hs_mu_maps *out, const struct hs_mu_capture *capture,
                    struct hs_arena *arena)
{
    memset(out, 0, sizeof(*out));
    if (!capture->maps_text || capture->maps_len == 0)
        return 0;
    struct hs_map *scratch = hs_arena_alloc(arena, sizeof(*scratch));
    if (!scratch)
        return -ENOMEM;
    struct load_ctx c = {out, arena, false};
    struct hs_maps_parser p;
    hs_maps_parser_init(&p, scratch);
    if (hs_maps_parser_feed(&p, capture->maps_text, capture->maps_len, add_map, &c) == 0)
        hs_maps_parser_finish(&p, add_map, &c);
    hs_arena_free(arena, scratch, sizeof(*scratch));
    if (c.oom)
        return -ENOMEM;
    for (size_t t = 0; t < capture->num_threads; t++) {
        struct hs_mu_map *m = hs_mu_maps_find(out, capture->threads[t].sp);
        if (m)
            m->thread_stack = true;
    }
    return 0;
}

struct hs_mu_map *hs_mu_maps_find(const struct hs_mu_maps *maps, uintptr_t addr)
{
    size_t lo = hs_range_first_ending_after(maps->maps, maps->num, addr, end);
    if (lo < maps->num && maps->maps[lo].start <= addr && addr < maps->maps[lo].end)
        return &maps->maps[lo];
    for (size_t i = 0; i < maps->num; i++)
        if (maps->maps[i].start <= addr && addr < maps->maps[i].end)
            return &maps->maps[i];
    return NULL;
}

void hs_mu_maps_free(struct hs_mu_maps *maps, struct hs_arena *arena)
{
    if (maps->maps)
        hs_arena_free(arena, maps->maps, maps->cap * sizeof(*maps->maps));
    memset(maps, 0, sizeof(*maps));
}
