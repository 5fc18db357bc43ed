/* entry_points.c: the allocation functions libmalloc_debug.so exports over glibc's.
 *
 * Each one is a single predicted branch when malloc debug is off: the mode is read once and
 * glibc's __libc_* function is tail-called (cost: one load, one compare, one jump on top of
 * glibc). With sample_guard alone (HS_MD_SAMPLING) an allocation adds a thread-local
 * decrement and a predicted branch (the countdown, sample_guard.h), a free or realloc a range
 * check of the pointer, before the same tail call. In the debug mode, malloc, calloc and
 * free go straight to debug_alloc.c's short paths when they are on (hs_md.lean: leak_track,
 * verify_pointers, backtrace; a layer less cut a tenth of what leak_track adds per call).
 * Everything else - first-call initialisation, calls made by the shim's own code, the other
 * debug paths, the sampled calls - lives in the out-of-line slow paths.
 */
#include "debug_alloc.h"
#include "debug_state.h"
#include "pointer_table.h"
#include "libc_malloc.h"
#include "guarded.h"
#include "record_allocs.h"
#include "sampled_alloc.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#define HS_EXPORT __attribute__((visibility("default")))
/* With acquire, so that the fields of hs_md set before the mode are seen by the short paths
 * below (on x86 the same plain load). */
#define HS_MODE() hs_md_mode_now()
#define HS_LIKELY(x) __builtin_expect(!!(x), 1)
/* sample_guard alone: true while the countdown runs (the call goes to glibc). */
#define HS_UNSAMPLED(mode) ((mode) == HS_MD_SAMPLING && hs_md_sample_skip())
/* sample_guard alone: true for a pointer outside the pool (it is glibc's). */
#define HS_NOT_IN_POOL(mode, ptr)                                                                  \
    ((mode) == HS_MD_SAMPLING && !hs_md_sample_guard_owns((uintptr_t)(ptr)))
/* The debug mode with one of the short paths on (path: lean or lean_malloc), outside the
 * shim's own code: the call goes straight to debug_alloc.c's short path. */
#define HS_LEAN(mode, path) ((mode) == HS_MD_DEBUG && hs_md.path && !hs_md_in_shim)

/* Slow path: the mode this call runs in: HS_MD_PASSTHROUGH when it must go to glibc
 * (malloc debug off, or the shim's own code calling), else HS_MD_DEBUG or HS_MD_SAMPLING.
 * Initialises on the first call. */
static __attribute__((noinline)) int slow_mode(void)
{
    if (hs_md_in_shim)
        return HS_MD_PASSTHROUGH;
    int mode = hs_md_mode_now();
    if (mode < HS_MD_PASSTHROUGH)
        mode = hs_md_init();
    return mode;
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

/* The debug paths first: the mode is final once it is HS_MD_DEBUG (read with acquire, so
 * that hs_md's fields set before it are seen), and then only the shim's own calls
 * (hs_md_in_shim) need slow_mode. */
#define DEBUG_NOW() HS_LIKELY(hs_md_mode_now() == HS_MD_DEBUG && !hs_md_in_shim)

static __attribute__((noinline)) void *malloc_slow(size_t size)
{
    if (DEBUG_NOW()) {
        if (hs_md.lean_fill)
            return hs_md_fill_malloc(size);
        if (hs_md.lean_malloc)
            return hs_md_lean_malloc(size);
        if (RECORDING())
            return recorded_malloc(size);
        return hs_md_debug_malloc(size);
    }
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_malloc(size);
    if (mode != HS_MD_DEBUG)
        return __libc_malloc(size);
    if (hs_md.lean_fill)
        return hs_md_fill_malloc(size);
    if (hs_md.lean_malloc)
        return hs_md_lean_malloc(size);
    if (RECORDING())
        return recorded_malloc(size);
    return hs_md_debug_malloc(size);
}

/* While the shim runs its own code (hs_md_in_shim), what glibc allocates for it goes straight
 * to glibc, and so do the frees. But such a call may also free or resize a block the program
 * allocated through the debug paths: dlopen and dlsym first free the thread's last dlerror
 * message, which a failed dlopen of the program's left behind. That block has its record or
 * header in front of it, and glibc's free of it aborts the program ("double free or
 * corruption"; the leak report's dlopen of the symbols plug-in at exit did). The pointer table
 * knows every such block when it is on, and no block glibc handed to the shim, so a block it
 * knows takes the debug path. */
static bool program_block_in_shim(const void *ptr)
{
    return hs_md_in_shim && ptr && hs_md_mode_now() == HS_MD_DEBUG && hs_md.track &&
           hs_md_ptr_find(ptr, NULL);
}

static void free_slow(void *ptr);
static void *realloc_slow(void *ptr, size_t size);

/* The program's block, freed or resized from the shim's code: as the program's own call. */
static __attribute__((noinline)) void free_program_block(void *ptr)
{
    int depth = hs_md_in_shim;
    hs_md_in_shim = 0;
    free_slow(ptr);
    hs_md_in_shim = depth;
}

static __attribute__((noinline)) void *realloc_program_block(void *ptr, size_t size)
{
    int depth = hs_md_in_shim;
    hs_md_in_shim = 0;
    void *p = realloc_slow(ptr, size);
    hs_md_in_shim = depth;
    return p;
}

static __attribute__((noinline)) void free_slow(void *ptr)
{
    if (DEBUG_NOW()) {
        if (hs_md.lean_fill)
            hs_md_fill_free(ptr);
        else if (hs_md.lean)
            hs_md_lean_free(ptr);
        else if (RECORDING())
            recorded_free(ptr);
        else
            hs_md_debug_free(ptr);
        return;
    }
    if (program_block_in_shim(ptr)) {
        free_program_block(ptr);
        return;
    }
    int mode = slow_mode();
    if (mode == HS_MD_DEBUG && hs_md.lean_fill)
        hs_md_fill_free(ptr);
    else if (mode == HS_MD_DEBUG && hs_md.lean)
        hs_md_lean_free(ptr);
    else if (mode == HS_MD_SAMPLING && hs_md_sample_guard_owns((uintptr_t)ptr))
        hs_md_sampled_free(ptr);
    else if (mode == HS_MD_DEBUG && RECORDING())
        recorded_free(ptr);
    else if (mode == HS_MD_DEBUG)
        hs_md_debug_free(ptr);
    else if (!hs_md_guarded_owns((uintptr_t)ptr)) /* never hand guarded memory to glibc */
        __libc_free(ptr);
}

static __attribute__((noinline)) void *calloc_slow(size_t nmemb, size_t size)
{
    if (DEBUG_NOW()) {
        if (hs_md.lean_fill)
            return hs_md_fill_calloc(nmemb, size);
        if (hs_md.lean_malloc)
            return hs_md_lean_calloc(nmemb, size);
        if (!RECORDING())
            return hs_md_debug_calloc(nmemb, size);
    }
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_calloc(nmemb, size);
    if (mode != HS_MD_DEBUG)
        return __libc_calloc(nmemb, size);
    if (hs_md.lean_fill)
        return hs_md_fill_calloc(nmemb, size);
    if (hs_md.lean_malloc)
        return hs_md_lean_calloc(nmemb, size);
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
    if (DEBUG_NOW() && !RECORDING())
        return hs_md_debug_realloc(ptr, size);
    if (program_block_in_shim(ptr))
        return realloc_program_block(ptr, size);
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_realloc(ptr, size);
    if (mode != HS_MD_DEBUG)
        return __libc_realloc(ptr, size);
    if (RECORDING())
        return recorded_realloc(ptr, size);
    return hs_md_debug_realloc(ptr, size);
}

static __attribute__((noinline)) void *memalign_slow(size_t alignment, size_t size)
{
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_memalign(alignment, size);
    if (mode != HS_MD_DEBUG)
        return __libc_memalign(alignment, size);
    if (RECORDING())
        return recorded_memalign(hs_md_debug_memalign, alignment, size);
    return hs_md_debug_memalign(alignment, size);
}

static __attribute__((noinline)) int posix_memalign_slow(void **memptr, size_t alignment,
                                                         size_t size)
{
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_posix_memalign(memptr, alignment, size);
    if (mode != HS_MD_DEBUG)
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
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING) /* glibc 2.36's aligned_alloc is memalign */
        return hs_md_sampled_memalign(alignment, size);
    if (mode != HS_MD_DEBUG)
        return __libc_memalign(alignment, size);
    if (RECORDING() && alignment != 0 && (alignment & (alignment - 1)) == 0)
        return recorded_memalign(hs_md_debug_aligned_alloc, alignment, size);
    return hs_md_debug_aligned_alloc(alignment, size);
}

static __attribute__((noinline)) void *valloc_slow(size_t size)
{
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_valloc(size);
    if (mode != HS_MD_DEBUG)
        return __libc_valloc(size);
    if (RECORDING())
        return recorded_memalign(hs_md_debug_memalign, (size_t)getpagesize(), size);
    return hs_md_debug_memalign((size_t)getpagesize(), size);
}

static __attribute__((noinline)) void *pvalloc_slow(size_t size)
{
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING)
        return hs_md_sampled_pvalloc(size);
    if (mode != HS_MD_DEBUG)
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
    int mode = slow_mode();
    if (mode == HS_MD_SAMPLING && hs_md_sample_guard_owns((uintptr_t)ptr))
        return hs_md_sampled_usable_size(ptr);
    if (mode != HS_MD_DEBUG)
        return ptr ? hs_md_libc_usable_size(ptr) : 0;
    return hs_md_debug_malloc_usable_size(ptr);
}

/* The exported functions: one load, one compare, one tail jump when off; with sample_guard
 * alone a countdown or a range check more. */

HS_EXPORT void *malloc(size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_malloc(size);
    if (HS_LEAN(mode, lean_malloc))
        return hs_md_lean_malloc(size);
    return malloc_slow(size);
}

extern __typeof(malloc) hs_md_self_malloc __attribute__((alias("malloc")));

HS_EXPORT void free(void *ptr)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_NOT_IN_POOL(mode, ptr))
        __libc_free(ptr);
    else if (HS_LEAN(mode, lean))
        hs_md_lean_free(ptr);
    else
        free_slow(ptr);
}

HS_EXPORT void *calloc(size_t nmemb, size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_calloc(nmemb, size);
    if (HS_LEAN(mode, lean_malloc))
        return hs_md_lean_calloc(nmemb, size);
    return calloc_slow(nmemb, size);
}

HS_EXPORT void *realloc(void *ptr, size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || (HS_NOT_IN_POOL(mode, ptr) && hs_md_sample_skip()))
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
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_memalign(alignment, size);
    return memalign_slow(alignment, size);
}

HS_EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return hs_libc_posix_memalign(memptr, alignment, size);
    return posix_memalign_slow(memptr, alignment, size);
}

HS_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_memalign(alignment, size);
    return aligned_alloc_slow(alignment, size);
}

HS_EXPORT void *valloc(size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_valloc(size);
    return valloc_slow(size);
}

HS_EXPORT void *pvalloc(size_t size)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_UNSAMPLED(mode))
        return __libc_pvalloc(size);
    return pvalloc_slow(size);
}

HS_EXPORT size_t malloc_usable_size(void *ptr)
{
    int mode = HS_MODE();
    if (HS_LIKELY(mode == HS_MD_PASSTHROUGH) || HS_NOT_IN_POOL(mode, ptr))
        return ptr ? hs_md_libc_usable_size(ptr) : 0;
    return malloc_usable_size_slow(ptr);
}
