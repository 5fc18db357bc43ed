/* debug_alloc.h: the allocation calls with malloc debug on.
 *
 * entry_points.c calls these only when hs_md.mode is HS_MD_DEBUG and the calling thread is
 * not inside the shim's own code. Semantics (errno, NULL, alignment rounding, realloc edge
 * cases) are Android malloc debug's; see docs/malloc_debug.md.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_DEBUG_ALLOC_H
#define HEAPSCOPE_MALLOC_DEBUG_DEBUG_ALLOC_H

#include "debug_state.h"

#include <stddef.h>

void *hs_md_debug_malloc(size_t size);
void hs_md_debug_free(void *ptr);
void *hs_md_debug_calloc(size_t nmemb, size_t size);
void *hs_md_debug_realloc(void *ptr, size_t size);
void *hs_md_debug_memalign(size_t alignment, size_t size);
int hs_md_debug_posix_memalign(void **memptr, size_t alignment, size_t size);
void *hs_md_debug_aligned_alloc(size_t alignment, size_t size);
void *hs_md_debug_pvalloc(size_t size);
size_t hs_md_debug_malloc_usable_size(void *ptr);

/* malloc, calloc and free when hs_md.lean (debug_state.h): the same results, fewer checks
 * (malloc and calloc also when hs_md.lean_malloc: free_track and fill_on_free act on free
 * only). The exported functions call them straight, outside the shim's own code
 * (entry_points.c). malloc has two: with allocation backtraces, and without (no capture, so
 * no frame array and a shorter prologue). */
void *hs_md_lean_malloc_traced(size_t size);
void *hs_md_lean_malloc_untraced(size_t size);
void *hs_md_lean_calloc(size_t nmemb, size_t size);
void hs_md_lean_free(void *ptr);

static inline void *hs_md_lean_malloc(size_t size)
{
    return (hs_md.cfg.options & HS_OPT_BACKTRACE) ? hs_md_lean_malloc_traced(size)
                                                  : hs_md_lean_malloc_untraced(size);
}

/* malloc, calloc and free when hs_md.lean_fill (debug_state.h): the fills alone. */
void *hs_md_fill_malloc(size_t size);
void *hs_md_fill_calloc(size_t nmemb, size_t size);
void hs_md_fill_free(void *ptr);

#endif
