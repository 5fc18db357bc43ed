/* count_allocs.h: malloc and friends for a test executable, forwarding to glibc's __libc_*
 * entry points and counting the calls made while counting is on, so that a test can show
 * that some code allocates nothing from glibc (the unreachable-memory sweeper: it runs in a
 * copy-on-write snapshot of the program, and must use its own arena). Include it in exactly
 * one file of the executable. */
#ifndef HEAPSCOPE_TESTS_COUNT_ALLOCS_H
#define HEAPSCOPE_TESTS_COUNT_ALLOCS_H

#include "libc_alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

static atomic_int g_counting_allocs;
static atomic_long g_counted_allocs;

static inline void count_allocs_start(void)
{
    atomic_store(&g_counted_allocs, 0);
    atomic_store(&g_counting_allocs, 1);
}

/* Stops counting; returns the calls made since count_allocs_start. */
static inline long count_allocs_stop(void)
{
    atomic_store(&g_counting_allocs, 0);
    return atomic_load(&g_counted_allocs);
}

static inline void count_alloc_call(void)
{
    if (atomic_load_explicit(&g_counting_allocs, memory_order_relaxed))
        atomic_fetch_add_explicit(&g_counted_allocs, 1, memory_order_relaxed);
}

#define COUNT_ALLOCS_EXPORT __attribute__((visibility("default")))
COUNT_ALLOCS_EXPORT void *malloc(size_t n)
{
    count_alloc_call();
    return __libc_malloc(n);
}
COUNT_ALLOCS_EXPORT void *calloc(size_t a, size_t b)
{
    count_alloc_call();
    return __libc_calloc(a, b);
}
COUNT_ALLOCS_EXPORT void *realloc(void *p, size_t n)
{
    count_alloc_call();
    return __libc_realloc(p, n);
}
COUNT_ALLOCS_EXPORT void free(void *p)
{
    if (p)
        count_alloc_call();
    __libc_free(p);
}
COUNT_ALLOCS_EXPORT void *memalign(size_t align, size_t n)
{
    count_alloc_call();
    return __libc_memalign(align, n);
}
COUNT_ALLOCS_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    count_alloc_call();
    return __libc_memalign(align, n);
}
COUNT_ALLOCS_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    count_alloc_call();
    return hs_libc_posix_memalign(out, align, n);
}
COUNT_ALLOCS_EXPORT void *valloc(size_t n)
{
    count_alloc_call();
    return __libc_memalign((size_t)getpagesize(), n);
}

#endif
