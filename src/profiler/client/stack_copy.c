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

bool hs_stack_is_own(uintptr_t sp)
{
    return sp >= t_stack_start && sp < t_stack_end;
}

/* Where _start found argc (ld.so's); the main thread's frames are all below it. */
extern void *__libc_stack_end;

/* A variable in this thread's static TLS, which glibc puts at the top of a thread's stack
 * mapping, above its frames (on the main thread it is elsewhere). */
static __thread char t_tls_marker __attribute__((tls_model("initial-exec")));

uintptr_t hs_stack_frames_end(uintptr_t sp)
{
    uintptr_t end = hs_stack_end(sp);
    /* A little above the limit: the outermost frame's CFA may be a word or two past it. */
    uintptr_t main_top = (uintptr_t)__libc_stack_end + 64;
    uintptr_t tls = (uintptr_t)&t_tls_marker;
    if (main_top > sp && main_top < end)
        return main_top;
    if (tls > sp && tls < end)
        return tls;
    return end;
}

uintptr_t hs_stack_copy_end(uintptr_t sp, uintptr_t hint)
{
    uintptr_t end = hs_stack_frames_end(sp);
    /* Only on the thread's own stack: the note is about its frames, not an alternate stack's. */
    if (hint > sp && hint < end && hs_stack_is_own(sp))
        return hint;
    return end;
}

size_t hs_stack_copy(uintptr_t sp, void *dst, size_t cap)
{
    uintptr_t end = hs_stack_frames_end(sp);
    if (end <= sp)
        return 0;
    size_t n = end - sp < cap ? (size_t)(end - sp) : cap;
    memcpy(dst, (const void *)sp, n);
    return n;
}

unsigned hs_stack_copy_gaps(uintptr_t sp, size_t span, const struct hs_stack_range *noted,
                            unsigned n, struct hs_stack_gap out[HS_STACK_GAPS])
{
    unsigned k = 0;
    for (unsigned i = 0; i < n && k < HS_STACK_GAPS; i++) {
        const struct hs_stack_range *r = &noted[i];
        if (r->lo <= sp || r->hi <= r->lo || r->hi - sp >= span || r->hi - sp > UINT32_MAX)
            continue;
        out[k].off = (uint32_t)(r->lo - sp);
        out[k].len = (uint32_t)(r->hi - r->lo);
        k++;
    }
    return hs_stack_gaps_valid(out, k, span) ? k : 0;
}

void hs_stack_copy_without_gaps(void *dst, uintptr_t sp, size_t span,
                                const struct hs_stack_gap *gaps, unsigned n)
{
    char *to = dst;
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(to, (const char *)sp + at, gaps[i].off - at);
        to += gaps[i].off - at;
        at = (size_t)gaps[i].off + gaps[i].len;
    }
    memcpy(to, (const char *)sp + at, span - at);
}
