/* pointer_table.h: the live-allocation table of the tracking options.
 *
 * Every live allocation made with backtrace, leak_track, free_track or verify_pointers on
 * is in the table with its requested size and allocation backtrace (or NULL). What the table
 * knows is split in two (pointer_table.c):
 *   - a bit per 16 bytes of address space says "a live block starts here": bitmaps per 64 MiB
 *     region of the address space (glibc's heaps are 64 MiB each and a thread allocates from
 *     its own arena's heap, so threads rarely share a region's lock), found through a
 *     directory indexed by the address;
 *   - a 16-byte record in the block's own memory, hs_md.track_offset bytes before the user
 *     pointer, holds the size and the backtrace (debug_alloc.c leaves room for it: the link
 *     area of a block with a header, or 16 bytes in front of a block without one).
 * So an add or a remove is a few stores to the block and one bit set or cleared under the
 * region's lock, without hashing or probing, and the table costs a bit per 16 bytes of heap
 * instead of tens of bytes per block. A record is checked (16 bits mixed from the pointer,
 * size and backtrace) when it is read: a program writing before its block (an underflow)
 * damages it, and a damaged record is reported, never followed.
 * The table holds no pointer to the program's memory (a bit is not a reference): the
 * unreachable-memory detector reading the shim's memory as roots cannot take it for one.
 * Bitmaps come from the shim's private arena, untouched pages never committed.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_H
#define HEAPSCOPE_MALLOC_DEBUG_POINTER_TABLE_H

#include "backtrace_table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a block's record (at user pointer - hs_md.track_offset). */
#define HS_MD_TRACK_RECORD 16u

/* The largest requested size a record holds (4 TiB - 1): a bigger request is not tracked
 * (hs_md_ptr_add fails and the allocation fails with ENOMEM). */
#define HS_MD_PTR_MAX_SIZE ((UINT64_C(1) << 42) - 1)

struct hs_md_ptr_info {
    size_t size;         /* requested size */
    struct hs_md_bt *bt; /* allocation backtrace (a counted reference), or NULL */
    /* A block without a header: log2 of the bytes from the start of its backing block to the
     * user pointer (4: the record alone; more for memalign). 0 when the header says it. */
    unsigned lead_shift;
    /* Read back only: the record did not check out (the program wrote over it). size, bt and
     * lead_shift are then 0; the block is known to be live, nothing more. */
    bool damaged;
    uint32_t tag; /* with damaged: the record's first word's high half, for the report */
};

/* Adds ptr (16-byte aligned, with room for its record): writes the record and marks it live;
 * takes over the caller's reference to info->bt. Returns false when memory for the table ran
 * out or the size does not fit (the allocation then fails). */
bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info);

/* Puts back an entry its caller has just removed (a check failed after all, or the block
 * stays with a new size). Needs no memory: never fails for a pointer removed before. */
bool hs_md_ptr_restore(const void *ptr, const struct hs_md_ptr_info *info);

/* Removes ptr and stores what it had in *out (the caller now owns the bt reference).
 * Returns false when ptr is not a live tracked allocation (any pointer may be asked: nothing
 * is read at ptr unless the table knows it as live). A block whose record is damaged stays
 * in the table (out->damaged): the caller reports it and leaves the block alone. */
bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out);

/* True when ptr is live; fills *out (without taking a reference) when out is not NULL. */
bool hs_md_ptr_find(const void *ptr, struct hs_md_ptr_info *out);

/* Same, but *out gets a new reference to the backtrace (release it with hs_md_bt_release):
 * taken under the table lock, so the record cannot be freed in between. */
bool hs_md_ptr_find_ref(const void *ptr, struct hs_md_ptr_info *out);

/* Number of live entries. */
size_t hs_md_ptr_count(void);

/* The most entries the table has held (the sum of each region's peak: an upper bound). */
size_t hs_md_ptr_peak(void);

/* Locks / unlocks the whole table (fork, malloc_disable, heap dumps). */
void hs_md_ptr_lock_all(void);
void hs_md_ptr_unlock_all(void);

/* Calls fn for every live entry, in address order (region by region, the regions newest
 * first when more than 1024 hold blocks); the caller must hold the table locked.
 * fn must not allocate through the shim or touch the table. */
void hs_md_ptr_foreach_locked(void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                         void *arg),
                              void *arg);

/* The same for the live entries whose pointer is in [lo, hi) only: regions outside the range
 * and bitmap words outside it are not read (malloc_iterate over one mapping). */
void hs_md_ptr_foreach_in_locked(uintptr_t lo, uintptr_t hi,
                                 void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                            void *arg),
                                 void *arg);

/* Writes the first cap live entries to out as {pointer, requested size} pairs (in the order
 * of hs_md_ptr_foreach_locked), and returns how many entries are live (possibly more than cap). The caller must
 * hold the table locked. One pass over the bitmaps: how the unreachable-memory check lists
 * 10^7 blocks. */
size_t hs_md_ptr_list_locked(uintptr_t (*out)[2], size_t cap);

#endif
