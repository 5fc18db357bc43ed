/* stack_copy.c: copying a thread's stack for a sample (see stack_copy.h). */
#include "stack_copy.h"

#include "proc_maps.h"

#include <string.h>

/* This thread's stack mapping, once found. */
static __thread uintptr_t t_stack_start __attribute__((tls_model("initial-exec")));
static __thread uintptr_t t_stack_end __attribute__((tls_model("initial-exec")));

uintptr_t hs_stack_end(uintptr_t sp)
{
    if (sp >= t_stack_start && sp < t_stack_end)
        return t_stack_end;
    struct hs_map m;
    if (!hs_maps_find(0, sp, &m))
        return 0;
    /* The first stack this thread uses is its own (later misses: an alternate stack). */
    if (t_stack_end == 0) {
        t_stack_start = m.start;
        t_stack_end = m.end;
    }
    return m.end;
}

size_t hs_stack_copy(uintptr_t sp, void *dst, size_t cap)
{
    uintptr_t end = hs_stack_end(sp);
    if (end <= sp)
        return 0;
    size_t n = end - sp < cap ? (size_t)(end - sp) : cap;
    memcpy(dst, (const void *)sp, n);
    return n;
}
