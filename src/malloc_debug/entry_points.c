/* entry_points.c: the allocation functions libmalloc_debug.so exports over glibc's.
 *
 * Each one is a single predicted branch when malloc debug is off: the mode is read once and
 * glibc's __libc_* function is tail-called (cost: one load, one compare, one jump on top of
 * glibc). Everything else - first-call initialisation, calls made by the shim's own code,
 * the debug paths - lives in the out-of-line slow path.
 */
#include "debug_alloc.h"
#include "debug_state.h"
#include "libc_malloc.h"
#include "record_allocs.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#define HS_EXPORT __attribute__((visibility("default")))
#define HS_PASSTHROUGH()                                                                           \
    __builtin_expect(__atomic_load_n(&hs_md.mode, __ATOMIC_RELAXED) == HS_MD_PASSTHROUGH, 1)

/* Slow path: true when this call must go to glibc (malloc debug off, or the shim's own
 * code calling). Initialises on the first call. */
static __attribute__((noinline)) int use_libc(void)
{
    if (hs_md_in_shim)
        return 1;
    int mode = hs_md_mode_now();
    if (mode < HS_MD_PASSTHROUGH)
        mode = hs_md_init();
    return mode != HS_MD_DEBUG;
}

#define RECORDING() __builtin_expect((hs_md.cfg.options & HS_OPT_RECORD_ALLOCS) != 0, 0)

/* record_allocs: each exported call is recorded once, here (debug_alloc.c calls itself). */
static __attribute__((noinline)) void *recorded_malloc(size_t size)
{
    hs_md_record_dump_if_requested();
    uint64_t start = hs_md_record_now_ns();
    void *p = hs_md_debug_malloc(size);
    hs_md_record_malloc(p, size, start);
    return p;
}

static __attribute__((noinline)) void recorded_free(void *ptr)
{
    hs_md_record_dump_if_requested();
    if (!ptr)
        return; /* free(NULL) is not recorded (as on Android) */
    uint64_t start = hs_md_record_now_ns();
    uint64_t slot = hs_md_record_reserve(); /* before the block can be reused */
    hs_md_debug_free(ptr);
    hs_md_record_free(slot, ptr, start);
}

static __attribute__((noinline)) void *recorded_realloc(void *ptr, size_t size)
{
    uint64_t start = hs_md_record_now_ns();
    uint64_t slot = hs_md_record_reserve();
    void *p = hs_md_debug_realloc(ptr, size);
    hs_md_record_realloc(slot, p, ptr, size, start);
    return p;
}

static __attribute__((noinline)) void *recorded_memalign(void *(*fn)(size_t, size_t),
                                                         size_t alignment, size_t size)
{
    uint64_t start = hs_md_record_now_ns();
    void *p = fn(alignment, size);
    hs_md_record_memalign(p, alignment, size, start);
    return p;
}

/* The slow paths: first call, the shim's own calls, the debug paths and record_allocs. Kept
 * out of line so that the exported functions need no stack frame on the pass-through path. */

static __attribute__((noinline)) void *malloc_slow(size_t size)
{
    if (use_libc())
        return __libc_malloc(size);
    if (RECORDING())
        return recorded_malloc(size);
    return hs_md_debug_malloc(size);
}

static __attribute__((noinline)) void free_slow(void *ptr)
{
    if (use_libc())
        __libc_free(ptr);
    else if (RECORDING())
        recorded_free(ptr);
    else
        hs_md_debug_free(ptr);
}

static __attribute__((noinline)) void *calloc_slow(size_t nmemb, size_t size)
{
    if (use_libc())
        return __libc_calloc(nmemb, size);
    if (RECORDING()) {
        uint64_t start = hs_md_record_now_ns();
        void *p = hs_md_debug_calloc(nmemb, size);
        hs_md_record_calloc(p, nmemb, size, start);
        return p;
    }
    return hs_md_debug_calloc(nmemb, size);
}

static __attribute__((noinline)) void *realloc_slow(void *ptr, size_t size)
{
    if (use_libc())
        return __libc_realloc(ptr, size);
    if (RECORDING())
        return recorded_realloc(ptr, size);
    return hs_md_debug_realloc(ptr, size);
}

static __attribute__((noinline)) void *memalign_slow(size_t alignment, size_t size)
{
    if (use_libc())
        return __libc_memalign(alignment, size);
    if (RECORDING())
        return recorded_memalign(hs_md_debug_memalign, alignment, size);
    return hs_md_debug_memalign(alignment, size);
}

static __attribute__((noinline)) int posix_memalign_slow(void **memptr, size_t alignment,
                                                         size_t size)
{
    if (use_libc())
        return hs_libc_posix_memalign(memptr, alignment, size);
    if (RECORDING()) {
        uint64_t start = hs_md_record_now_ns();
        int err = hs_md_debug_posix_memalign(memptr, alignment, size);
        if (err != EINVAL) /* a bad alignment never reaches the allocator */
            hs_md_record_memalign(err ? NULL : *memptr, alignment, size, start);
        return err;
    }
    return hs_md_debug_posix_memalign(memptr, alignment, size);
}

static __attribute__((noinline)) void *aligned_alloc_slow(size_t alignment, size_t size)
{
    if (use_libc())
        return __libc_memalign(alignment, size); /* glibc 2.36's aligned_alloc is memalign */
    if (RECORDING() && alignment != 0 && (alignment & (alignment - 1)) == 0)
        return recorded_memalign(hs_md_debug_aligned_alloc, alignment, size);
    return hs_md_debug_aligned_alloc(alignment, size);
}

static __attribute__((noinline)) void *valloc_slow(size_t size)
{
    if (use_libc())
        return __libc_valloc(size);
    if (RECORDING())
        return recorded_memalign(hs_md_debug_memalign, (size_t)getpagesize(), size);
    return hs_md_debug_memalign((size_t)getpagesize(), size);
}

static __attribute__((noinline)) void *pvalloc_slow(size_t size)
{
    if (use_libc())
        return __libc_pvalloc(size);
    if (RECORDING()) {
        size_t page = (size_t)getpagesize();
        size_t rounded = (size + page - 1) & ~(page - 1);
        if (rounded >= size) /* else the call fails with ENOMEM, unrecorded */
            return recorded_memalign(hs_md_debug_memalign, page, rounded);
    }
    return hs_md_debug_pvalloc(size);
}

static __attribute__((noinline)) size_t malloc_usable_size_slow(void *ptr)
{
    if (use_libc())
        return ptr ? hs_md_libc_usable_size(ptr) : 0;
    return hs_md_debug_malloc_usable_size(ptr);
}

/* The exported functions: one load, one compare, one tail jump. */

HS_EXPORT void *malloc(size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_malloc(size);
    return malloc_slow(size);
}

extern __typeof(malloc) hs_md_self_malloc __attribute__((alias("malloc")));

HS_EXPORT void free(void *ptr)
{
    if (HS_PASSTHROUGH())
        __libc_free(ptr);
    else
        free_slow(ptr);
}

HS_EXPORT void *calloc(size_t nmemb, size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_calloc(nmemb, size);
    return calloc_slow(nmemb, size);
}

HS_EXPORT void *realloc(void *ptr, size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_realloc(ptr, size);
    return realloc_slow(ptr, size);
}

HS_EXPORT void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(ptr, total);
}

HS_EXPORT void *memalign(size_t alignment, size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_memalign(alignment, size);
    return memalign_slow(alignment, size);
}

HS_EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (HS_PASSTHROUGH())
        return hs_libc_posix_memalign(memptr, alignment, size);
    return posix_memalign_slow(memptr, alignment, size);
}

HS_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_memalign(alignment, size);
    return aligned_alloc_slow(alignment, size);
}

HS_EXPORT void *valloc(size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_valloc(size);
    return valloc_slow(size);
}

HS_EXPORT void *pvalloc(size_t size)
{
    if (HS_PASSTHROUGH())
        return __libc_pvalloc(size);
    return pvalloc_slow(size);
}

HS_EXPORT size_t malloc_usable_size(void *ptr)
{
    if (HS_PASSTHROUGH())
        return ptr ? hs_md_libc_usable_size(ptr) : 0;
    return malloc_usable_size_slow(ptr);
}
