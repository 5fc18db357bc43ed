/* captured_maps.h: the mappings of a capture (capture.h's maps text), as a sorted array with
 * what the sweeper's passes ask of each mapping: its kind, whether it is glibc's libc, and
 * whether a thread's stack pointer is in it. Parsed once per pass that needs it (roots.c,
 * glibc_heap.c), in the sweeper, from its arena (no malloc).
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_CAPTURED_MAPS_H
#define HEAPSCOPE_MEMUNREACHABLE_CAPTURED_MAPS_H

#include "capture.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum hs_mu_map_kind {
    HS_MU_MAP_ANON,   /* unnamed, [anon:...] or [anon_shmem:...] */
    HS_MU_MAP_FILE,   /* a file */
    HS_MU_MAP_HEAP,   /* [heap] */
    HS_MU_MAP_STACK,  /* [stack] */
    HS_MU_MAP_PSEUDO, /* [vvar], [vdso], [vsyscall], ... */
    HS_MU_MAP_DEVICE, /* /dev/... other than /dev/zero and /dev/shm/, anon_inode:... */
};

struct hs_mu_map {
    uintptr_t start, end;
    uintptr_t load_base;
    uint64_t inode;
    dev_t dev;
    unsigned perms; /* HS_MAP_* (proc_maps.h) */
    enum hs_mu_map_kind kind;
    bool thread_stack; /* some captured thread's SP is in it */
    bool libc;         /* a file mapping of glibc's libc.so */
};

struct hs_mu_maps {
    struct hs_mu_map *maps; /* in the text's order: ascending addresses from the kernel */
    size_t num, cap;
};

/* Parses capture's maps into out (zeroed first) and marks the threads' stacks. Returns 0 or
 * -ENOMEM. Free with hs_mu_maps_free, also after a failure. */
int hs_mu_maps_load(struct hs_mu_maps *out, const struct hs_mu_capture *capture,
                    struct hs_arena *arena);

/* The mapping containing addr, or NULL: a binary search, and a linear one for a text that
 * was not sorted. */
struct hs_mu_map *hs_mu_maps_find(const struct hs_mu_maps *maps, uintptr_t addr);

void hs_mu_maps_free(struct hs_mu_maps *maps, struct hs_arena *arena);

#endif
