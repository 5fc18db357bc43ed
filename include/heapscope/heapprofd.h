/* heapscope/heapprofd.h: report a custom allocator's allocations to heapscope's profiler.
 *
 * heapscope's sampling profiler (`heapscope profile`) sees malloc & co. by itself. Memory
 * managed elsewhere - an arena, a pool, an object cache, GPU buffers - can be profiled too:
 * register a named heap, then report each allocation and free of it. Each heap becomes its
 * own profile (FILE.HEAP.pb.gz beside the malloc one), with the same call stacks.
 *
 *     #include <heapscope/heapprofd.h>
 *     static uint32_t pool_heap;
 *     void pool_init(void) { pool_heap = heapscope_heap_register("my_pool", 0); }
 *     void *pool_get(size_t n) {
 *         void *p = ...;
 *         heapscope_heap_report_alloc(pool_heap, (uintptr_t)p, n);
 *         return p;
 *     }
 *     void pool_put(void *p) { heapscope_heap_report_free(pool_heap, (uintptr_t)p); ... }
 *
 * The functions live in libheapprofd.so, the profiler's client, which `heapscope profile`
 * preloads. The inline wrappers below find them with dlsym, so the same program runs without
 * the client: registering then returns 0, and reports cost one predicted branch. Reports
 * are cheap unless sampled: a heap is sampled like malloc, every byte with probability
 * 1/interval, and only a sampled allocation (and its free) is sent to the daemon.
 *
 * Rules: up to 255 custom heaps per process; names of 1..63 bytes (the heap "libc.malloc" is
 * malloc's); an id is what identifies an allocation until its free (typically its address),
 * any value below 2^56; report the free of an id before the same id is allocated again.
 * Thread-safe and async-signal-safe (no malloc); the first call of each wrapper may allocate
 * (dlsym), so make it outside signal handlers.
 */
#ifndef HEAPSCOPE_HEAPPROFD_H
#define HEAPSCOPE_HEAPPROFD_H

#include "dl_lookup.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- libheapprofd.so's exports ---------------------------------------------------------- */

/* Registers heap `name`, sampled every `interval` bytes on average (0: the profiling session's
 * interval; 1: every allocation). Registering a name twice returns the same heap. Returns the
 * heap's id (1..255), or 0 when the name is invalid or 255 heaps exist. Works before a
 * session starts: the heap is announced to every later session. */
uint32_t heapscope_heap_register(const char *name, uint64_t interval);

/* Reports an allocation of size bytes identified by id in heap; the client samples it.
 * Returns true when it was sampled (sent to the daemon). */
bool heapscope_heap_report_alloc(uint32_t heap, uint64_t id, uint64_t size);

/* Reports an allocation the caller sampled itself, standing for sampled_size bytes (an
 * allocator with its own sampling). Returns true when it was sent. */
bool heapscope_heap_report_sample(uint32_t heap, uint64_t id, uint64_t size, uint64_t sampled_size);

/* Reports the free of id in heap (ignored unless its allocation was sampled). */
void heapscope_heap_report_free(uint32_t heap, uint64_t id);

/* True while a profiling session is on in this process. */
bool heapscope_profiling(void);

/* ---- Wrappers that work without libheapprofd.so ------------------------------------------ */

static inline uint32_t heapscope_heap_register_if_loaded(const char *name, uint64_t interval)
{
    typedef uint32_t (*fn_t)(const char *, uint64_t);
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, heapscope_heap_register);
    return fn ? fn(name, interval) : 0;
}

static inline bool heapscope_heap_report_alloc_if_loaded(uint32_t heap, uint64_t id, uint64_t size)
{
    typedef bool (*fn_t)(uint32_t, uint64_t, uint64_t);
    if (heap == 0)
        return false; /* never registered: nothing to look up */
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, heapscope_heap_report_alloc);
    return fn ? fn(heap, id, size) : false;
}

static inline bool heapscope_heap_report_sample_if_loaded(uint32_t heap, uint64_t id, uint64_t size,
                                                          uint64_t sampled_size)
{
    typedef bool (*fn_t)(uint32_t, uint64_t, uint64_t, uint64_t);
    if (heap == 0)
        return false;
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, heapscope_heap_report_sample);
    return fn ? fn(heap, id, size, sampled_size) : false;
}

static inline void heapscope_heap_report_free_if_loaded(uint32_t heap, uint64_t id)
{
    typedef void (*fn_t)(uint32_t, uint64_t);
    if (heap == 0)
        return;
    fn_t fn = HEAPSCOPE_LOOKUP_(fn_t, heapscope_heap_report_free);
    if (fn)
        fn(heap, id);
}

#ifdef __cplusplus
}
#endif

#endif
