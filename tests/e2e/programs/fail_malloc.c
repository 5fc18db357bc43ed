/* fail_malloc.c: an LD_PRELOAD library that makes malloc fail, to test the tools' out-of-memory
 * paths (test_report.py). With HS_FAIL_MALLOC_AFTER=N the first N calls of malloc, calloc,
 * realloc (to a new size), memalign, aligned_alloc and posix_memalign succeed and every later
 * one returns NULL with errno ENOMEM; unset, nothing fails. It calls glibc's __libc_*
 * functions directly, so that no lookup allocates. At exit, with HS_FAIL_MALLOC_COUNT set, it
 * writes the number of calls it saw to stderr ("fail_malloc: calls=N").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* The project builds with hidden visibility: these must be seen to interpose. */
#define EXPORT __attribute__((visibility("default")))

static long g_after = -1; /* -1: not read yet; -2: unset */
static long g_calls;      /* atomic */

static long after(void)
{
    long a = __atomic_load_n(&g_after, __ATOMIC_RELAXED);
    if (a == -1) {
        const char *v = getenv("HS_FAIL_MALLOC_AFTER");
        a = v && *v ? strtol(v, NULL, 10) : -2;
        __atomic_store_n(&g_after, a, __ATOMIC_RELAXED);
    }
    return a;
}

/* True when this call must fail. */
static bool fails(void)
{
    long n = __atomic_fetch_add(&g_calls, 1, __ATOMIC_RELAXED);
    long a = after();
    if (a >= 0 && n >= a) {
        errno = ENOMEM;
        return true;
    }
    return false;
}

EXPORT void *malloc(size_t size)
{
    return fails() ? NULL : __libc_malloc(size);
}

EXPORT void *calloc(size_t n, size_t size)
{
    return fails() ? NULL : __libc_calloc(n, size);
}

EXPORT void *realloc(void *p, size_t size)
{
    if (p && size == 0)
        return __libc_realloc(p, 0); /* a free: never fails */
    return fails() ? NULL : __libc_realloc(p, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
    return fails() ? NULL : __libc_memalign(align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
    return fails() ? NULL : __libc_memalign(align, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (fails())
        return ENOMEM;
    void *p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

static __attribute__((destructor)) void report_calls(void)
{
    if (getenv("HS_FAIL_MALLOC_COUNT")) {
        char line[64];
        int n = snprintf(line, sizeof(line), "fail_malloc: calls=%ld\n",
                         __atomic_load_n(&g_calls, __ATOMIC_RELAXED));
        if (write(2, line, (size_t)n) < 0)
            return;
    }
}
