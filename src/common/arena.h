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

struct hs_arena {
    struct hs_arena_class classes[HS_ARENA_CLASSES];
    size_t mapped_bytes; /* everything mmap'd so far, for the tools' own memory figures */
};

#define HS_ARENA_INIT {0}

/* Returns a block of at least `size` bytes aligned to 16, or NULL (mmap failed). Memory of a
 * new chunk is zero; recycled blocks are not cleared. */
void *hs_arena_alloc(struct hs_arena *a, size_t size);

/* Same, cleared to zero. */
void *hs_arena_calloc(struct hs_arena *a, size_t size);

/* Returns a block to the arena; `size` must be the size it was allocated with. NULL is ok. */
void hs_arena_free(struct hs_arena *a, void *p, size_t size);

/* Bytes the arena has mapped (chunks and large blocks). */
size_t hs_arena_mapped_bytes(const struct hs_arena *a);

void hs_arena_lock_all(struct hs_arena *a);
void hs_arena_unlock_all(struct hs_arena *a);

#endif
