/* elf_cache.c: the last few ELF files used, kept open (see elf_cache.h). */
#include "elf_cache.h"

void hs_elf_cache_init(struct hs_elf_cache *c)
{
    for (int i = 0; i < HS_ELF_CACHE_SLOTS; i++) {
        c->slots[i].used = false;
        c->slots[i].indexed = false;
    }
    c->tick = 0;
    c->arena = NULL;
}

void hs_elf_cache_use_arena(struct hs_elf_cache *c, struct hs_arena *arena)
{
    c->arena = arena;
}

static void close_slot(struct hs_elf_cache *c, int i)
{
    if (c->slots[i].indexed)
        hs_elf_index_free(&c->slots[i].index, c->arena);
    c->slots[i].indexed = false;
    hs_elf_close(&c->slots[i].elf);
}

bool hs_elf_cache_lookup(struct hs_elf_cache *c, const struct hs_elf *elf, uintptr_t vaddr,
                         char *name, size_t name_cap, uintptr_t *offset)
{
    for (int i = 0; c->arena && i < HS_ELF_CACHE_SLOTS; i++) {
        if (!c->slots[i].used || !c->slots[i].ok || &c->slots[i].elf != elf)
            continue;
        if (!c->slots[i].indexed)
            c->slots[i].indexed = hs_elf_index_build(elf, c->arena, &c->slots[i].index);
        if (c->slots[i].indexed)
            return hs_elf_index_lookup(elf, &c->slots[i].index, vaddr, name, name_cap, offset);
        break;
    }
    return hs_elf_lookup(elf, vaddr, name, name_cap, offset);
}

const struct hs_elf *hs_elf_cache_get(struct hs_elf_cache *c, const char *path, dev_t dev,
                                      uint64_t inode, bool deleted)
{
    int found = -1, victim = 0;
    for (int i = 0; i < HS_ELF_CACHE_SLOTS && found < 0; i++) {
        if (c->slots[i].used && c->slots[i].dev == dev && c->slots[i].inode == inode)
            found = i;
        else if (!c->slots[i].used ||
                 (c->slots[victim].used && c->slots[i].last_use < c->slots[victim].last_use))
            victim = i;
    }
    if (found < 0) {
        found = victim;
        if (c->slots[found].used)
            close_slot(c, found);
        c->slots[found].used = true;
        c->slots[found].dev = dev;
        c->slots[found].inode = inode;
        struct hs_elf *elf = &c->slots[found].elf;
        bool ok = hs_elf_open(elf, path);
        /* A deleted file's path may name another file by now. Otherwise the identity is
         * not checked: on overlayfs the maps show the underlying file's device. */
        if (ok && deleted && (elf->dev != dev || elf->inode != inode)) {
            hs_elf_close(elf);
            ok = false;
        }
        c->slots[found].ok = ok;
    }
    c->slots[found].last_use = ++c->tick;
    return c->slots[found].ok ? &c->slots[found].elf : NULL;
}

void hs_elf_cache_close(struct hs_elf_cache *c)
{
    for (int i = 0; i < HS_ELF_CACHE_SLOTS; i++) {
        if (c->slots[i].used)
            close_slot(c, i);
        c->slots[i].used = false;
    }
}
