/* heapscope/dl_lookup.h: how heapscope's public headers call a library that may be absent.
 *
 * The inline wrappers of malloc_debug.h and heapprofd.h look their function up once with
 * dlsym(RTLD_DEFAULT, ...) and cache the answer (also "absent"), so a program built with them
 * runs with or without the library preloaded. On glibc older than 2.34 link with -ldl.
 */
#ifndef HEAPSCOPE_DL_LOOKUP_H
#define HEAPSCOPE_DL_LOOKUP_H

#include <dlfcn.h>
#include <stddef.h>

/* dlsym's "search the global scope" handle; RTLD_DEFAULT needs _GNU_SOURCE. */
#ifdef RTLD_DEFAULT
#define HEAPSCOPE_RTLD_DEFAULT RTLD_DEFAULT
#else
#define HEAPSCOPE_RTLD_DEFAULT ((void *)0)
#endif

/* Looks name up once per cache slot. The slot holds the address, or a sentinel for "absent"
 * so that a missing shim costs one dlsym only. */
static inline void *heapscope_lookup_(void **slot, const char *name)
{
    static char absent;
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!p) {
        p = dlsym(HEAPSCOPE_RTLD_DEFAULT, name);
        if (!p)
            p = &absent;
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    }
    return p == (void *)&absent ? NULL : p;
}

#define HEAPSCOPE_LOOKUP_(type, name)                                                              \
    __extension__({                                                                                \
        static void *heapscope_slot_;                                                              \
        (type) heapscope_lookup_(&heapscope_slot_, #name);                                         \
    })

#endif
