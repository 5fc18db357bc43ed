/* sampled_alloc.h: the allocation calls with sample_guard alone (mode HS_MD_SAMPLING).
 *
 * entry_points.c calls glibc directly while the countdown runs (malloc and friends) and for
 * pointers outside the pool (free, realloc, malloc_usable_size); these functions take the
 * rest: a call whose countdown ran out (it may be sampled into a guarded slot, or go to glibc
 * when it does not fit or no slot is free) and a pointer inside the pool. Semantics (errno,
 * alignment rounding, realloc edge cases) are glibc's, since the program runs on glibc.
 *
 * glibc's heap sees the same calls as without sample_guard: a sampled call is also made to
 * glibc, whose block (the shadow) stays unused beside the sampled one and is freed, or given
 * to realloc, when the sampled block is. Without it the sampled calls missing from glibc's
 * sequence change its heap's shape, and so how often it trims its heaps and faults their
 * pages in again: malloc_bench's arena, trimmed 91 times per run with glibc alone, was trimmed
 * 64 to 342 times (and took 1,800 to 5,000 page faults instead of 1,867) with 5 to 300 blocks
 * sampled out of 6 million, at a cost larger than the sampling's own. The shadows cost at most
 * the pool's size in glibc's memory, mostly never touched.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SAMPLED_ALLOC_H
#define HEAPSCOPE_MALLOC_DEBUG_SAMPLED_ALLOC_H

#include <stddef.h>

void *hs_md_sampled_malloc(size_t size);
void *hs_md_sampled_calloc(size_t nmemb, size_t size);
void *hs_md_sampled_realloc(void *ptr, size_t size);
void *hs_md_sampled_memalign(size_t alignment, size_t size);
int hs_md_sampled_posix_memalign(void **memptr, size_t alignment, size_t size);
void *hs_md_sampled_valloc(size_t size);
void *hs_md_sampled_pvalloc(size_t size);
/* ptr is in the pool (a range check said so). */
void hs_md_sampled_free(void *ptr);
size_t hs_md_sampled_usable_size(void *ptr);

#endif
