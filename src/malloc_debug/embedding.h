/* embedding.h: which library this copy of the shim is built into.
 *
 * The shim's code is linked into two libraries: libmalloc_debug.so (preloaded; off unless
 * LIBC_DEBUG_MALLOC_OPTIONS is set) and libmemunreachable.so, which carries its own copy so
 * that a program linked with -lmemunreachable has its allocations tracked from the first
 * one without any setup. Each library defines hs_md_embedding once.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_EMBEDDING_H
#define HEAPSCOPE_MALLOC_DEBUG_EMBEDDING_H

#include <stdbool.h>

struct hs_md_embedding {
    /* Built into another library (not preloaded): this copy stays off when another
     * allocator shim (a preloaded libmalloc_debug.so) comes first in symbol lookup. */
    bool embedded;
    /* Options used when LIBC_DEBUG_MALLOC_OPTIONS is not set (NULL: stay off). */
    const char *default_options;
};

extern const struct hs_md_embedding hs_md_embedding;

#endif
