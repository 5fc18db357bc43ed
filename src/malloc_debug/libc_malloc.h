/* libc_malloc.h: the real glibc allocator, reached past our own interposed symbols.
 *
 * glibc exports its allocator a second time under __libc_* names (GLIBC_2.2.5), so the
 * shim can call it without dlsym. posix_memalign and aligned_alloc have no such alias and
 * are built on __libc_memalign; malloc_usable_size is looked up once at start-up.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_LIBC_MALLOC_H
#define HEAPSCOPE_MALLOC_DEBUG_LIBC_MALLOC_H

#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

/* glibc's malloc_usable_size for a pointer glibc returned. */
size_t hs_md_libc_usable_size(void *ptr);

#endif
