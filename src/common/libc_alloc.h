/* libc_alloc.h: glibc's allocator under its second set of names.
 *
 * glibc exports malloc & co. a second time as __libc_* (GLIBC_2.2.5). A library that defines
 * malloc itself (the malloc debug shim, the profiler's client) reaches the real allocator
 * through them without dlsym. posix_memalign and aligned_alloc have no such alias: build them
 * on __libc_memalign.
 */
#ifndef HEAPSCOPE_COMMON_LIBC_ALLOC_H
#define HEAPSCOPE_COMMON_LIBC_ALLOC_H

#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

/* posix_memalign on __libc_memalign, with its argument checks; errno is left alone. */
static inline int hs_libc_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0)
        return EINVAL;
    int saved_errno = errno;
    void *p = __libc_memalign(alignment, size);
    errno = saved_errno;
    if (!p)
        return ENOMEM;
    *memptr = p;
    return 0;
}

#endif
