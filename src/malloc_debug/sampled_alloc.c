/* sampled_alloc.c: the allocation calls of sample_guard alone (see sampled_alloc.h). */
#include "sampled_alloc.h"

#include "debug_state.h"
#include "guarded.h"
#include "libc_malloc.h"

#include <errno.h>
#include <string.h>

/* Inline, so that the allocation backtrace has no more of the shim's frames than the entry
 * point's and this file's caller. */
#define HS_INLINE static inline __attribute__((always_inline))

/* A sampled block, or NULL: not drawn (the countdown is not out, or the shim's own call),
 * too large or too aligned for a slot, or no slot free. The caller then asks glibc. */
HS_INLINE void *try_sample(size_t size, size_t align, bool zero)
{
    if (hs_md_in_shim || !hs_md_sample_due())
        return NULL;
    if (size == 0)
        size = 1;
    if (size > (size_t)HS_MD_SAMPLE_SLOT_PAGES * HS_MD_PAGE || align > HS_MD_PAGE)
        return NULL;
    struct hs_md_bt *bt = hs_md_guarded_capture();
    void *p = hs_md_guarded_alloc(size, align, 0, zero, true, bt);
    hs_md_bt_release(bt);
    return p;
}

/* Gives the sampled block p its shadow, glibc's block for the same call (see sampled_alloc.h);
 * returns p. */
static void *with_shadow(void *p, void *shadow)
{
    struct hs_md_gblock *g = hs_md_sample_guard_record((uintptr_t)p);
    if (g)
        g->shadow = (uintptr_t)shadow;
    else if (shadow)
        __libc_free(shadow);
    return p;
}

/* Takes the shadow of the sampled block g away from it (the caller frees or reallocs it). */
static void *take_shadow(struct hs_md_gblock *g)
{
    void *shadow = (void *)g->shadow;
    g->shadow = 0;
    return shadow;
}

void *hs_md_sampled_malloc(size_t size)
{
    void *p = try_sample(size, 16, false);
    return p ? with_shadow(p, __libc_malloc(size)) : __libc_malloc(size);
}

void *hs_md_sampled_calloc(size_t nmemb, size_t size)
{
    size_t total;
    void *p = NULL;
    if (!__builtin_mul_overflow(nmemb, size, &total))
        p = try_sample(total, 16, true);
    return p ? with_shadow(p, __libc_calloc(nmemb, size)) : __libc_calloc(nmemb, size);
}

/* glibc's memalign rounding: at least 16, a power of two. 0 when no slot could hold it. */
static size_t slot_alignment(size_t alignment)
{
    if (alignment <= 16)
        return 16;
    if (alignment > HS_MD_PAGE)
        return 0;
    size_t a = 16;
    while (a < alignment)
        a <<= 1;
    return a;
}

void *hs_md_sampled_memalign(size_t alignment, size_t size)
{
    size_t a = slot_alignment(alignment);
    void *p = a ? try_sample(size, a, false) : NULL;
    return p ? with_shadow(p, __libc_memalign(alignment, size)) : __libc_memalign(alignment, size);
}

int hs_md_sampled_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0)
        return EINVAL;
    size_t a = slot_alignment(alignment);
    void *p = a ? try_sample(size, a, false) : NULL;
    if (!p)
        return hs_libc_posix_memalign(memptr, alignment, size);
    void *shadow = NULL;
    if (hs_libc_posix_memalign(&shadow, alignment, size) != 0)
        shadow = NULL;
    *memptr = with_shadow(p, shadow);
    return 0;
}

void *hs_md_sampled_valloc(size_t size)
{
    void *p = try_sample(size, HS_MD_PAGE, false);
    return p ? with_shadow(p, __libc_valloc(size)) : __libc_valloc(size);
}

void *hs_md_sampled_pvalloc(size_t size)
{
    size_t rounded = hs_md_page_up(size);
    void *p =
        rounded >= size ? try_sample(rounded ? rounded : HS_MD_PAGE, HS_MD_PAGE, false) : NULL;
    return p ? with_shadow(p, __libc_pvalloc(size)) : __libc_pvalloc(size);
}

void hs_md_sampled_free(void *ptr)
{
    struct hs_md_gblock *g;
    if (hs_md_guarded_check(ptr, "free", true, &g) != HS_MD_GUARDED_LIVE)
        return; /* reported; the free does nothing */
    void *shadow = take_shadow(g);
    struct hs_md_bt *bt = hs_md_guarded_capture();
    hs_md_guarded_release(g, bt);
    hs_md_bt_release(bt);
    __libc_free(shadow);
}

void *hs_md_sampled_realloc(void *ptr, size_t size)
{
    if (!hs_md_sample_guard_owns((uintptr_t)ptr)) { /* the countdown ran out on a realloc */
        if (!ptr)
            return hs_md_sampled_malloc(size);
        if (size == 0)
            return __libc_realloc(ptr, 0);
        void *p = try_sample(size, 16, false);
        if (!p)
            return __libc_realloc(ptr, size);
        size_t old = hs_md_libc_usable_size(ptr);
        memcpy(p, ptr, old < size ? old : size);
        /* glibc's realloc all the same: its result is the shadow. */
        void *shadow = __libc_realloc(ptr, size);
        if (!shadow)
            __libc_free(ptr);
        return with_shadow(p, shadow);
    }
    struct hs_md_gblock *g;
    if (hs_md_guarded_check(ptr, "realloc", false, &g) != HS_MD_GUARDED_LIVE)
        return NULL;
    if (size == 0) {
        hs_md_sampled_free(ptr);
        return NULL;
    }
    void *old_shadow = (void *)g->shadow;
    void *p = hs_md_sample_skip() ? NULL : try_sample(size, 16, false);
    void *q = NULL;
    if (old_shadow) /* what glibc alone would have done with this block */
        q = __libc_realloc(old_shadow, size);
    else if (!p)
        q = __libc_malloc(size);
    if (!p && !q)
        return NULL; /* ENOMEM, the block (and its shadow) stays */
    if (old_shadow && q)
        g->shadow = 0; /* realloc took it */
    if (p)
        with_shadow(p, q);
    else
        p = q; /* glibc's block is the program's now */
    memcpy(p, ptr, g->size < size ? g->size : size);
    hs_md_sampled_free(ptr);
    return p;
}

size_t hs_md_sampled_usable_size(void *ptr)
{
    struct hs_md_gblock *g;
    if (hs_md_guarded_check(ptr, "malloc_usable_size", false, &g) != HS_MD_GUARDED_LIVE)
        return 0;
    return g->size;
}
