/* inject_allocator.c: a malloc replacement for test_process_inject, preloaded into
 * inject_busy_alloc. Every call holds one lock while it spins a little, as an allocator's
 * slow path would: a thread stopped anywhere in this object most likely holds it, and a
 * dlopen made by that thread would then wait for it forever. */
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static int g_lock;

static void lock(void)
{
    while (__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE))
        ;
    for (volatile int i = 0; i < 300; i++)
        ;
}

static void unlock(void)
{
    __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) void *malloc(size_t n)
{
    lock();
    void *p = __libc_malloc(n);
    unlock();
    return p;
}

__attribute__((visibility("default"))) void *calloc(size_t n, size_t size)
{
    lock();
    void *p = __libc_calloc(n, size);
    unlock();
    return p;
}

__attribute__((visibility("default"))) void *realloc(void *q, size_t n)
{
    lock();
    void *p = __libc_realloc(q, n);
    unlock();
    return p;
}

__attribute__((visibility("default"))) void free(void *p)
{
    lock();
    __libc_free(p);
    unlock();
}
