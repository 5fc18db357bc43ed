/* heapscope/memunreachable.h: find unreachable (leaked) heap memory in a live process.
 *
 * The C port of Android's libmemunreachable. A check stops every thread of the process for a
 * few milliseconds (ptrace, from a helper that shares the address space), copies their
 * registers, lets them run again, and walks a copy-on-write snapshot of the heap in a forked
 * process: every allocation that no pointer in globals, thread stacks, registers, thread-local
 * storage or other reachable allocations refers to (interior pointers count) is unreachable.
 *
 * Setup: link with -lmemunreachable (pkg-config heapscope). The library keeps track of the
 * allocations itself from the first one of the process (its own copy of heapscope's malloc
 * debug tracking), so nothing else is needed; under `heapscope leaks` or with
 * libmalloc_debug.so preloaded, it uses the preloaded shim's table instead (and its
 * backtraces, with the option `backtrace`).
 *
 *     #include <heapscope/memunreachable.h>
 *     ...
 *     LogUnreachableMemory(true, 100);     // summary + up to 100 leaks, with contents
 *     if (!NoLeaks()) ...
 *
 * All functions are thread-safe and may be called while other threads allocate; they must
 * not be called from a signal handler.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_H
#define HEAPSCOPE_MEMUNREACHABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UNREACHABLE_CONTENTS_LENGTH 32
#define UNREACHABLE_BACKTRACE_FRAMES 16

/* One unreachable allocation that no other unreachable allocation refers to, with what it
 * keeps unreachable ("referenced") and the leaks with the same allocation backtrace merged
 * into it ("similar"). */
struct UnreachableLeak {
    uintptr_t begin;
    size_t size;
    size_t referenced_count; /* unreachable allocations reachable only through this one */
    size_t referenced_size;
    size_t similar_count; /* other leaks with the same backtrace, merged into this one */
    size_t similar_size;
    size_t similar_referenced_count;
    size_t similar_referenced_size;
    size_t total_size; /* size + referenced + similar + similar referenced */
    uint8_t contents[UNREACHABLE_CONTENTS_LENGTH]; /* the first bytes of the allocation */
    size_t contents_length;                        /* min(size, UNREACHABLE_CONTENTS_LENGTH) */
    size_t num_backtrace_frames;
    uintptr_t backtrace_frames[UNREACHABLE_BACKTRACE_FRAMES]; /* at allocation, absolute pcs */
};

struct UnreachableMemoryInfo {
    struct UnreachableLeak *leaks; /* largest total_size first; at most `limit` */
    size_t num_leaks;              /* all unreachable allocations, before folding */
    size_t leak_bytes;             /* their bytes */
    size_t num_allocations;        /* all live allocations */
    size_t allocation_bytes;
    size_t version;            /* set to 0 before the call; anything else is refused */
    size_t num_reported_leaks; /* entries in leaks[] */
};

/* Fills *info (version must be 0) with up to `limit` leaks. Returns false, with a line in the
 * log, when the check could not run (no allocation tracking, ptrace refused, timeout). Free
 * with FreeUnreachableMemory. */
bool GetUnreachableMemory(struct UnreachableMemoryInfo *info, size_t limit);
void FreeUnreachableMemory(struct UnreachableMemoryInfo *info);

/* The text report (Android's format) as a malloc'ed string, or NULL on failure; free it with
 * FreeUnreachableMemoryString (or free). */
char *GetUnreachableMemoryString(bool log_contents, size_t limit);
void FreeUnreachableMemoryString(char *text);

/* Logs "<leak bytes> bytes in <n> allocations unreachable out of <bytes> bytes in <n>
 * allocations" and up to `limit` leaks. Returns false when the check could not run. */
bool LogUnreachableMemory(bool log_contents, size_t limit);

/* True when the check ran and found nothing unreachable. */
bool NoLeaks(void);

/* Figures of the last check of this process (heapscope's addition). */
struct UnreachableMemoryStats {
    uint64_t pause_ns;  /* how long the threads were stopped */
    uint64_t total_ns;  /* the whole check, as the caller saw it */
    size_t num_threads; /* threads stopped */
};
void GetLastUnreachableMemoryStats(struct UnreachableMemoryStats *stats);

#ifdef __cplusplus
}
#endif

#endif
