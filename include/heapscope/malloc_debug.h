/* heapscope/malloc_debug.h: the functions libmalloc_debug.so exports beside malloc & co.
 *
 * These are Android's malloc debug introspection calls, with Android's signatures and
 * behaviour. They exist only while heapscope's malloc debug shim is loaded
 * (LD_PRELOAD=.../libmalloc_debug.so); glibc has none of them.
 *
 * Two ways to call them:
 *
 *  1. Directly (get_malloc_leak_info(...)) from a program that always runs under the shim.
 *     The program must then be linked with -Wl,--unresolved-symbols=ignore-in-object-files or
 *     against the shim, and fails to start without it. Usually not what you want.
 *
 *  2. Through the heapscope_* wrappers below (recommended). Each looks its function up once
 *     with dlsym(RTLD_DEFAULT, ...) and, when the shim is not loaded, returns a clear failure
 *     instead of crashing: false, -1 (errno ENOSYS) or empty results. There is no link-time
 *     dependency on the shim; on glibc older than 2.34 link with -ldl for dlsym.
 *
 *         #include <heapscope/malloc_debug.h>
 *
 *         uint8_t *info;
 *         size_t overall, entry, total, frames;
 *         if (heapscope_get_malloc_leak_info(&info, &overall, &entry, &total, &frames)) {
 *             for (size_t off = 0; off < overall; off += entry) {
 *                 const size_t *hdr = (const size_t *)(info + off);   // size, count
 *                 const uintptr_t *pcs = (const uintptr_t *)(hdr + 2); // frames, 0-padded
 *                 ...
 *             }
 *             heapscope_free_malloc_leak_info(info);
 *         }
 *
 * The wrappers are thread-safe (a racing first lookup just repeats the dlsym). The first call
 * of each may allocate (dlsym), so do not make it from a signal handler.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_H
#define HEAPSCOPE_MALLOC_DEBUG_H

#include "dl_lookup.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The shim's exports ---------------------------------------------------------------- */

/* Copies the live allocations that have a backtrace (option `backtrace`) into a new buffer,
 * sorted by size (largest first), then by backtrace, with identical (size, backtrace)
 * allocations merged. The buffer holds *overall_size / *info_size entries of *info_size
 * bytes each:
 *     size_t size;                        bytes of each allocation
 *     size_t num_allocations;             allocations merged into this entry
 *     uintptr_t frames[*backtrace_size];  absolute pcs, innermost first, zero-padded
 * so *info_size == 2 * sizeof(size_t) + *backtrace_size * sizeof(uintptr_t).
 * *total_memory is the sum of size * num_allocations. Free the buffer with
 * free_malloc_leak_info. When backtraces are not being recorded, or nothing is live, *info is
 * NULL and every size is 0 (the former is logged). If any argument is NULL nothing is
 * written and an error is logged. */
void get_malloc_leak_info(uint8_t **info, size_t *overall_size, size_t *info_size,
                          size_t *total_memory, size_t *backtrace_size);

/* Frees a buffer from get_malloc_leak_info (NULL is ignored). */
void free_malloc_leak_info(uint8_t *info);

/* Calls callback(ptr, size, arg) for every live tracked allocation whose pointer lies in
 * [base, base + size). Must be called between malloc_disable() and malloc_enable(); the
 * callback must not allocate. Returns 0, or -1 on error. */
int malloc_iterate(uintptr_t base, size_t size,
                   void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg);

/* Stops every allocation call of every other thread until malloc_enable(). */
void malloc_disable(void);
void malloc_enable(void);

/* Stores up to frame_count frames of the allocation backtrace of pointer (a live tracked
 * allocation) into frames; returns how many (0 when there is none). */
ssize_t malloc_backtrace(void *pointer, uintptr_t *frames, size_t frame_count);

/* ---- Wrappers for programs that may run without the shim -------------------------------- */

/* True when libmalloc_debug.so is loaded in this process (malloc debug may still be off:
 * the shim is loaded but LIBC_DEBUG_MALLOC_OPTIONS is unset). */
static inline bool heapscope_malloc_debug_loaded(void)
{
    return HEAPSCOPE_LOOKUP_(void *, get_malloc_leak_info) != NULL;
}

/* get_malloc_leak_info through the shim. Returns true when *info holds entries; false when the
 * shim is not loaded, backtraces are not being recorded, nothing is live, or an argument is
 * NULL. The outputs that are not NULL are always set (to NULL / 0 on failure). */
static inline bool heapscope_get_malloc_leak_info(uint8_t **info, size_t *overall_size,
                                                  size_t *info_size, size_t *total_memory,
                                                  size_t *backtrace_size)
{
    typedef void (*fn_t)(uint8_t **, size_t *, size_t *, size_t *, size_t *);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, get_malloc_leak_info);
    if (info)
        *info = NULL;
    if (overall_size)
        *overall_size = 0;
    if (info_size)
        *info_size = 0;
    if (total_memory)
        *total_memory = 0;
    if (backtrace_size)
        *backtrace_size = 0;
    if (!fn)
        return false;
    fn(info, overall_size, info_size, total_memory, backtrace_size);
    return info && *info != NULL;
}

/* free_malloc_leak_info through the shim; does nothing when it is not loaded. */
static inline void heapscope_free_malloc_leak_info(uint8_t *info)
{
    typedef void (*fn_t)(uint8_t *);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, free_malloc_leak_info);
    if (fn)
        fn(info);
}

/* malloc_iterate through the shim; -1 with errno ENOSYS when it is not loaded. */
static inline int heapscope_malloc_iterate(uintptr_t base, size_t size,
                                           void (*callback)(uintptr_t ptr, size_t size, void *arg),
                                           void *arg)
{
    typedef int (*fn_t)(uintptr_t, size_t, void (*)(uintptr_t, size_t, void *), void *);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, malloc_iterate);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(base, size, callback, arg);
}

/* malloc_disable / malloc_enable through the shim; false when it is not loaded. */
static inline bool heapscope_malloc_disable(void)
{
    typedef void (*fn_t)(void);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, malloc_disable);
    if (fn)
        fn();
    return fn != NULL;
}

static inline bool heapscope_malloc_enable(void)
{
    typedef void (*fn_t)(void);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, malloc_enable);
    if (fn)
        fn();
    return fn != NULL;
}

/* malloc_backtrace through the shim; -1 with errno ENOSYS when it is not loaded. */
static inline ssize_t heapscope_malloc_backtrace(void *pointer, uintptr_t *frames,
                                                 size_t frame_count)
{
    typedef ssize_t (*fn_t)(void *, uintptr_t *, size_t);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, malloc_backtrace);
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(pointer, frames, frame_count);
}

#ifdef __cplusplus
}
#endif

#endif
