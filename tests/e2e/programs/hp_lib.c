/* hp_lib.c: a library hp_workload dlopens after the profiler attached: its call site is in a
 * mapping the daemon has not seen yet. */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline, visibility("default"))) void *hp_lib_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    if (p != NULL)
        memset(p, 1, n < 16 ? n : 16);
    return p;
}
