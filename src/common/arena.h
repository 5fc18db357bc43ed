/* arena.h: a private allocator on mmap, for the tools' own bookkeeping.
 *
 * The tools must never allocate through the allocator they watch (the shim would recurse
 * into itself, the leak detector would see its own memory), so their tables live here:
 * size classes from 16 bytes to 64 KiB, each with a free list and a bump region carved from
 * 256 KiB mmap chunks; larger blocks are mapped one by one. Frees are sized (the caller says how
 * big the block is), so blocks carry no header.
 *
 * Threading: each size class has its own spinlock. Fork: call hs_arena_lock_all() in a
 * pthread_atfork prepare handler and hs_arena_unlock_all() in the parent and child handlers.
 * Not async-signal-safe (a handler could interrupt a holder of a class lock).
 *
 * Mapping list (opt-in, hs_arena_track_mappings): the arena then also records every range it
 * has mmap'd, in a list kept in its own mmap'd block, so that a user can name all of its memory
 * (the leak detector excludes its own memory from the roots) and unmap all of it at once
 * (hs_arena_destroy). Arenas that do not opt in behave exactly as before.
 *
 * Fault injection, for tests (docs/testing.md): HEAPSCOPE_ARENA_FAIL_AFTER=N in the
 * environment makes every mapping after the process's first N fail (a new chunk, a large
 * block, a large block's growth), so the callers' out-of-memory paths can be walked through.
 */
#ifndef HEAPSCOPE_COMMON_ARENA_H
#define HEAPSCOPE_COMMON_ARENA_H

#include "spinlock.h"

#include <stddef.h>
#include <stdint.h>

#define HS_ARENA_CLASSES 24
#define HS_ARENA_MAX_SMALL 65536

struct hs_arena_class {
    hs_spinlock lock;
    void *free_list;       /* freed blocks, linked through their first word */
    uintptr_t bump, limit; /* unused tail of the current chunk */
};

/* A range the arena has mmap'd. */
struct hs_arena_mapping {
    uintptr_t begin, end; /* [begin, end), page aligned */
};

struct hs_arena {
    struct hs_arena_class classes[HS_ARENA_CLASSES];
    size_t mapped_bytes; /* everything mmap'd so far, for the tools' own memory figures */
    /* Mapping list, only with hs_arena_track_mappings. */
    hs_spinlock maps_lock;
    int track_maps;
    struct hs_arena_mapping *maps; /* mmap'd on its own; maps_cap entries */
    size_t num_maps, maps_cap;
    int huge_pages; /* hs_arena_use_huge_pages */
};

#define HS_ARENA_INIT                                                                              \
    {                                                                                              \
        0                                                                                          \
    }

/* Returns a block of at least `size` bytes aligned to 16, or NULL (mmap failed). Memory of a
 * new chunk is zero; recycled blocks are not cleared. */
void *hs_arena_alloc(struct hs_arena *a, size_t size);

/* Same, cleared to zero. */
void *hs_arena_calloc(struct hs_arena *a, size_t size);

/* Resizes the block p of old_size bytes (NULL: none) to new_size bytes, keeping the first
 * min(old_size, new_size) bytes, and returns it (perhaps moved), or NULL when memory ran out
 * (p is then left as it was). A block larger than HS_ARENA_MAX_SMALL that stays so is moved by
 * mremap: no copy, and a growing array costs only the pages it touches. Bytes past old_size
 * are zero when the block was remapped or newly mapped, unspecified otherwise. */
void *hs_arena_grow(struct hs_arena *a, void *p, size_t old_size, size_t new_size);

/* Returns a block to the arena; `size` must be the size it was allocated with. NULL is ok. */
void hs_arena_free(struct hs_arena *a, void *p, size_t size);

/* The arena as a hash table's allocator (hash_table.h): {hs_arena_table_alloc,
 * hs_arena_table_free, arena}. */
static inline void *hs_arena_table_alloc(void *arena, size_t size)
{
    return hs_arena_alloc(arena, size);
}
static inline void hs_arena_table_free(void *arena, void *p, size_t size)
{
    hs_arena_free(arena, p, size);
}

/* Bytes the arena has mapped (chunks and large blocks). */
size_t hs_arena_mapped_bytes(const struct hs_arena *a);

void hs_arena_lock_all(struct hs_arena *a);
void hs_arena_unlock_all(struct hs_arena *a);

/* Makes the arena record every range it maps from now on. Call it on a fresh arena, before
 * the first allocation. */
void hs_arena_track_mappings(struct hs_arena *a);

/* Copies up to `cap` ranges the arena (with tracking) has mapped and still holds, the list's
 * own block included, to out (NULL when cap is 0). Returns how many there are; call again with
 * a bigger array when that is more than cap (allocating the array may add a range). */
size_t hs_arena_mappings(struct hs_arena *a, struct hs_arena_mapping *out, size_t cap);

/* Unmaps everything a tracking arena has mapped (no-op without tracking). *a must not be used
 * afterwards (it may itself live in the arena's memory); a new arena starts from
 * HS_ARENA_INIT. No other thread may use the arena meanwhile. */
void hs_arena_destroy(struct hs_arena *a);

/* From now on, the arena's large blocks of 2 MiB and more ask for transparent huge pages
 * (MADV_HUGEPAGE; the system may still give small ones). For arenas of dense arrays written
 * whole, where a page fault per 4 KiB costs more than the writing: the unreachable-memory
 * sweeper's lists and indexes of 10^7 blocks. Never for sparse tables (malloc debug's bitmaps
 * and directory), where a huge page would commit 2 MiB for one entry. */
void hs_arena_use_huge_pages(struct hs_arena *a);

#endif
