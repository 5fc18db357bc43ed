/* maps_snapshot.h: /proc/<pid>/maps read once into a sorted array, for many lookups.
 *
 * hs_maps_find reads and parses the whole maps file for every address; printing thousands of
 * backtraces that way read /proc/self/maps tens of times per backtrace. A snapshot parses it
 * once into memory taken from a private arena (never malloc, so the shim can use it inside
 * its own paths), and answers each lookup with a binary search. The mappings can change
 * after the snapshot: a caller that finds no mapping for an address can re-read it
 * (hs_maps_snapshot_read again).
 *
 * Threading: a snapshot belongs to one caller; no locking. Not async-signal-safe (the arena
 * takes locks).
 */
#ifndef HEAPSCOPE_COMMON_MAPS_SNAPSHOT_H
#define HEAPSCOPE_COMMON_MAPS_SNAPSHOT_H

#include "arena.h"
#include "proc_maps.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One mapping, as struct hs_map without its PATH_MAX buffer. */
struct hs_snapshot_map {
    uintptr_t start, end;
    uint64_t offset;
    uintptr_t load_base;
    dev_t dev;
    uint64_t inode;
    unsigned perms;
    bool deleted;
    uint32_t path_off; /* into the snapshot's path bytes, NUL-terminated */
};

struct hs_maps_snapshot {
    struct hs_arena *arena;
    struct hs_snapshot_map *maps; /* sorted by start, not overlapping (the kernel's order) */
    size_t count, maps_cap;       /* maps_cap entries allocated */
    char *paths;
    size_t paths_len, paths_cap;
};

/* An empty snapshot whose memory comes from arena. */
void hs_maps_snapshot_init(struct hs_maps_snapshot *s, struct hs_arena *arena);

/* (Re-)reads /proc/<pid>/maps (pid 0: this process), replacing the contents. Returns false
 * with errno set when the file cannot be read or memory runs out; the snapshot is then empty
 * (or holds the entries read before a read error). */
bool hs_maps_snapshot_read(struct hs_maps_snapshot *s, pid_t pid);

/* Copies the mapping containing addr into *out (as hs_maps_find would). */
bool hs_maps_snapshot_find(const struct hs_maps_snapshot *s, uintptr_t addr, struct hs_map *out);

/* Returns the snapshot's memory to its arena; the snapshot is empty afterwards. */
void hs_maps_snapshot_free(struct hs_maps_snapshot *s);

#endif
