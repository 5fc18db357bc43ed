/* got_hooks_alt_malloc.c: another allocator (counting, on glibc's), for test_got_hooks: a
 * library bound to it (RTLD_DEEPBIND) keeps its slots. */
#include "libc_alloc.h"

#include <stddef.h>

static unsigned long alt_calls;

#define ALT_EXPORT __attribute__((visibility("default")))

ALT_EXPORT unsigned long gh_alt_calls(void)
{
    return __atomic_load_n(&alt_calls, __ATOMIC_RELAXED);
}

static void count(void)
{
    __atomic_fetch_add(&alt_calls, 1, __ATOMIC_RELAXED);
}

ALT_EXPORT void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}

ALT_EXPORT void *calloc(size_t n, size_t size)
{
    count();
    return __libc_calloc(n, size);
}

ALT_EXPORT void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}

ALT_EXPORT void free(void *p)
{
    count();
    __libc_free(p);
}

ALT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    count();
    return hs_libc_posix_memalign(out, align, n);
}

ALT_EXPORT void *valloc(size_t n)
{
    count();
    return __libc_valloc(n);
}
