/* elf_cache.c: the last few ELF files used, kept open (see elf_cache.h). */
#include "elf_cache.h"

void hs_elf_cache_init(struct hs_elf_cache *c)
{
    for (int i = 0; i < HS_ELF_CACHE_SLOTS; i++)
        c->slots[i].used = false;
    c->tick = 0;
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
            hs_elf_close(&c->slots[found].elf);
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
            hs_elf_close(&c->slots[i].elf);
        c->slots[i].used = false;
    }
}
