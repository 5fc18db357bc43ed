/* libc_malloc.h: the real glibc allocator, reached past the shim's own symbols (the
 * __libc_* names, src/common/libc_alloc.h); malloc_usable_size is looked up once at start-up.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_LIBC_MALLOC_H
#define HEAPSCOPE_MALLOC_DEBUG_LIBC_MALLOC_H

#include "libc_alloc.h"

#include <stddef.h>

/* glibc's malloc_usable_size for a pointer glibc returned. */
size_t hs_md_libc_usable_size(void *ptr);

#endif
