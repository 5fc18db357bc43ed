/* elf_cache.h: a few ELF files kept open while one backtrace or one dump is symbolized.
 *
 * Frames of one stack mostly fall in a handful of objects; keeping the last few mapped
 * avoids an open+mmap per frame. Files are keyed by device and inode (as /proc/PID/maps
 * shows them); the least recently used one is closed to make room. No allocation, no
 * locking: a cache belongs to one caller, usually on its stack.
 */
#ifndef HEAPSCOPE_COMMON_ELF_CACHE_H
#define HEAPSCOPE_COMMON_ELF_CACHE_H

#include "elf_symbols.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HS_ELF_CACHE_SLOTS 6

struct hs_elf_cache {
    struct {
        bool used, ok; /* ok: elf is open and is the file the mapping names */
        bool indexed;  /* index built (only with an arena) */
        dev_t dev;
        uint64_t inode;
        unsigned last_use;
        struct hs_elf elf;
        struct hs_elf_index index;
    } slots[HS_ELF_CACHE_SLOTS];
    unsigned tick;
    struct hs_arena *arena; /* NULL: no symbol indexes (no allocation at all) */
};

void hs_elf_cache_init(struct hs_elf_cache *c);

/* Makes the cache build an address-sorted symbol index (hs_elf_index_build) for each file,
 * from arena, so that many lookups in one file stay cheap. Call right after init. */
void hs_elf_cache_use_arena(struct hs_elf_cache *c, struct hs_arena *arena);

/* hs_elf_lookup on elf, a file this cache returned, through its index when it has one. */
bool hs_elf_cache_lookup(struct hs_elf_cache *c, const struct hs_elf *elf, uintptr_t vaddr,
                         char *name, size_t name_cap, uintptr_t *offset);

/* The ELF file at path, which a mapping shows with device dev and inode; NULL when it cannot
 * be opened or is not ELF. When the mapping is marked deleted, the file now at path is used
 * only if it is still the same file (its device and inode match). */
const struct hs_elf *hs_elf_cache_get(struct hs_elf_cache *c, const char *path, dev_t dev,
                                      uint64_t inode, bool deleted);

/* Closes every file. */
void hs_elf_cache_close(struct hs_elf_cache *c);

#endif
