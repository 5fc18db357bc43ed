/* maps_snapshot.c: /proc/<pid>/maps parsed once into a sorted array (see maps_snapshot.h). */
#include "maps_snapshot.h"

#include "range_lookup.h"

#include <errno.h>
#include <string.h>

void hs_maps_snapshot_init(struct hs_maps_snapshot *s, struct hs_arena *arena)
{
    memset(s, 0, sizeof(*s));
    s->arena = arena;
}

void hs_maps_snapshot_free(struct hs_maps_snapshot *s)
{
    hs_arena_free(s->arena, s->maps, s->maps_cap * sizeof(*s->maps));
    hs_arena_free(s->arena, s->paths, s->paths_cap);
    hs_maps_snapshot_init(s, s->arena);
}

/* Grows a block of *cap bytes (or entries of `unit` bytes) to hold at least `need`. */
static bool grow(struct hs_arena *a, void **block, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = hs_arena_alloc(a, n * unit);
    if (!p) {
        errno = ENOMEM;
        return false;
    }
    if (*block)
        memcpy(p, *block, *cap * unit);
    hs_arena_free(a, *block, *cap * unit);
    *block = p;
    *cap = n;
    return true;
}

static int add_map(const struct hs_map *m, void *arg)
{
    struct hs_maps_snapshot *s = arg;
    size_t len = strlen(m->path) + 1;
    if (!grow(s->arena, (void **)&s->maps, &s->maps_cap, s->count + 1, sizeof(*s->maps)) ||
        !grow(s->arena, (void **)&s->paths, &s->paths_cap, s->paths_len + len, 1) ||
        s->paths_len + len > UINT32_MAX)
        return 1;
    memcpy(s->paths + s->paths_len, m->path, len);
    s->maps[s->count++] = (struct hs_snapshot_map){
        .start = m->start,
        .end = m->end,
        .offset = m->offset,
        .load_base = m->load_base,
        .dev = m->dev,
        .inode = m->inode,
        .perms = m->perms,
        .deleted = m->deleted,
        .path_off = (uint32_t)s->paths_len,
    };
    s->paths_len += len;
    return 0;
}

bool hs_maps_snapshot_read(struct hs_maps_snapshot *s, pid_t pid)
{
    s->count = 0;
    s->paths_len = 0;
    int r = hs_maps_foreach(pid, add_map, s);
    if (r == 1)
        errno = ENOMEM;
    /* The kernel lists mappings by address; a hostile or racing source could not, and the
     * binary search needs order: drop what is out of order. */
    size_t kept = 0;
    for (size_t i = 0; i < s->count; i++)
        if (kept == 0 || s->maps[i].start >= s->maps[kept - 1].end)
            s->maps[kept++] = s->maps[i];
    s->count = kept;
    return r == 0;
}

bool hs_maps_snapshot_find(const struct hs_maps_snapshot *s, uintptr_t addr, struct hs_map *out)
{
    size_t i = hs_range_find(s->maps, s->count, addr, start, end);
    if (i == s->count)
        return false;
    const struct hs_snapshot_map *m = &s->maps[i];
    out->start = m->start;
    out->end = m->end;
    out->offset = m->offset;
    out->load_base = m->load_base;
    out->dev = m->dev;
    out->inode = m->inode;
    out->perms = m->perms;
    out->deleted = m->deleted;
    const char *path = s->paths + m->path_off;
    size_t len = strnlen(path, sizeof(out->path) - 1);
    memcpy(out->path, path, len);
    out->path[len] = '\0';
    return true;
}
