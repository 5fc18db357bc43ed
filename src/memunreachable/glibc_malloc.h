/* glibc_malloc.h: the facts of glibc's malloc (ptmalloc, 2.32 and later, x86_64) that the
 * glibc heap walk (glibc_heap.h) relies on. Nothing here is exported by glibc: the values
 * come from its malloc/malloc.c and arena.c, and every one of them is checked against the
 * snapshot before it is trusted (a walk must end exactly where the arena says it ends).
 *
 * Chunks: a chunk starts with two words, prev_size (lent to the chunk below while that one is
 * in use) and size | flags; user memory starts 16 bytes in. Chunks are 16-byte aligned and at
 * least 32 bytes. A chunk is in use when the chunk above it has PREV_INUSE set, except chunks
 * in a tcache or a fastbin, which glibc keeps marked in use.
 *   usable size (malloc_usable_size) = chunk size - 8 (heap chunk; the next prev_size is lent)
 *                                    = chunk size - 16 (mmapped chunk)
 *
 * struct malloc_state (2200 bytes): int mutex; int flags; int have_fastchunks; (pad)
 *   fastbinsY[10] @16; top @96; last_remainder @104; bins[254] @112; binmap[4] @2144;
 *   next @2160; next_free @2168; attached_threads @2176; system_mem @2184;
 *   max_system_mem @2192. An empty bin i (1..127) holds fd == bk == its own address - 16.
 * heap_info (a non-main arena's heap, aligned to 64 MiB): ar_ptr, prev, size,
 *   mprotect_size, pagesize (2.35+), padding: 48 bytes (32 before 2.35). An arena's first
 *   heap holds its malloc_state right after it.
 * tcache_perthread_struct (a 0x290-byte chunk per thread): uint16_t counts[64];
 *   tcache_entry *entries[64]. Entries point at user memory; an entry's first word is its
 *   next pointer.
 * Safe-linking (2.32+): the next pointers inside free tcache and fastbin chunks are stored as
 *   (address of the pointer >> 12) ^ pointer.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_GLIBC_MALLOC_H
#define HEAPSCOPE_MEMUNREACHABLE_GLIBC_MALLOC_H

#include <stdint.h>

#define HS_GLIBC_CHUNK_HDR 16u
#define HS_GLIBC_MIN_CHUNK 32u
#define HS_GLIBC_ALIGN 16u
#define HS_GLIBC_PREV_INUSE 1u
#define HS_GLIBC_IS_MMAPPED 2u
#define HS_GLIBC_NON_MAIN_ARENA 4u
#define HS_GLIBC_FLAGS 7u

#define HS_GLIBC_MSTATE_MUTEX 0u
#define HS_GLIBC_MSTATE_FASTBINS 16u
#define HS_GLIBC_NFASTBINS 10u
#define HS_GLIBC_MSTATE_TOP 96u
#define HS_GLIBC_MSTATE_BINS 112u
#define HS_GLIBC_NBINS 127u /* bins 1..127, an fd/bk pair each */
#define HS_GLIBC_MSTATE_NEXT 2160u
#define HS_GLIBC_MSTATE_SYSTEM_MEM 2184u
#define HS_GLIBC_MSTATE_MAX_SYSTEM_MEM 2192u
#define HS_GLIBC_MSTATE_SIZE 2200u

#define HS_GLIBC_HEAP_MAX (64ul << 20)
#define HS_GLIBC_HEAP_INFO_SIZE 48u     /* 2.35 and later */
#define HS_GLIBC_HEAP_INFO_SIZE_OLD 32u /* 2.32 - 2.34 */

#define HS_GLIBC_TCACHE_BINS 64u
#define HS_GLIBC_TCACHE_CHUNK 0x290u /* the chunk of a tcache_perthread_struct */
#define HS_GLIBC_TCACHE_ENTRIES 128u /* offset of entries[] in the struct */
/* The largest chunk a tcache holds (bin 63). */
#define HS_GLIBC_TCACHE_MAX_CHUNK (HS_GLIBC_MIN_CHUNK + 16u * (HS_GLIBC_TCACHE_BINS - 1))

/* Chunk size of tcache bin i, and of fastbin i. */
static inline uintptr_t hs_glibc_bin_chunk_size(unsigned i)
{
    return HS_GLIBC_MIN_CHUNK + 16u * i;
}

/* Safe-linking: the pointer stored at address pos. */
static inline uintptr_t hs_glibc_reveal(uintptr_t pos, uintptr_t stored)
{
    return (pos >> 12) ^ stored;
}

#endif
