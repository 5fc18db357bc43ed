/* capture.h: what the collector hands the sweeper, and the sweeper's entry point.
 *
 * The collector (collector.c) stops every thread of the process, copies their registers and
 * /proc/PID/maps into a struct hs_mu_capture in its private arena, and forks the sweeper,
 * which inherits it (and a copy-on-write snapshot of the whole address space). The sweeper
 * (sweep.c) walks the heap and writes the result to a pipe (result_codec.h); it runs in a
 * forked single-threaded copy of the process: no malloc, no locks the program may have held,
 * raw system calls and the private arena only.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_CAPTURE_H
#define HEAPSCOPE_MEMUNREACHABLE_CAPTURE_H

#include "arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Words of struct user_regs_struct on x86_64. */
#define HS_MU_MAX_REGS 27

struct hs_mu_thread {
    pid_t tid;
    uintptr_t sp;                   /* stack pointer at capture */
    uintptr_t regs[HS_MU_MAX_REGS]; /* every general register (NT_PRSTATUS), fs_base included */
    size_t num_regs;
};

struct hs_mu_range {
    uintptr_t begin, end; /* [begin, end) */
};

struct hs_mu_capture {
    pid_t pid;
    struct hs_mu_thread *threads;
    size_t num_threads;
    char *maps_text; /* /proc/PID/maps as read at capture */
    size_t maps_len;
    struct hs_mu_range *excluded; /* the detector's own memory: never roots, never scanned */
    size_t num_excluded;
};

/* How the sweeper gets the heap: the allocator's introspection calls (heapscope's malloc
 * debug table), or a walk of glibc's own chunks in the snapshot (glibc_heap.h). */
struct hs_mu_heap_source {
    int (*iterate)(uintptr_t base, size_t size,
                   void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg);
    /* May be NULL; preferred to iterate when present. Every allocation at once, in no order:
     * out[i] = {begin, size} for the first cap of them; returns how many there are (more than
     * cap: call again with room), SIZE_MAX on failure; with out NULL it only counts. */
    size_t (*list)(uintptr_t (*out)[2], size_t cap);
    ssize_t (*backtrace)(void *ptr, uintptr_t *frames, size_t max); /* may be NULL */
    /* Used by the collector only (collector.h), never by the sweeper: malloc_disable holds
     * every lock of the allocator's tables until malloc_enable, which any task sharing the
     * address space may call. Either may be NULL. */
    void (*disable)(void);
    void (*enable)(void);
    /* May be NULL. Called by the sweeper once, before iterate, for a source that reads the
     * snapshot itself and needs the capture (the maps) and memory (the sweeper's arena, valid
     * until the sweep returns). Returns 0 or a negative errno value (the sweep then fails). */
    int (*prepare)(const struct hs_mu_capture *capture, struct hs_arena *arena);
    /* May be NULL. The allocator's own bookkeeping memory, which never holds the program's
     * references: left out of the roots like the detector's own. Called by T0 after disable
     * (the list cannot change until enable); fills up to cap ranges and returns how many there
     * are. */
    size_t (*own_memory)(struct hs_arena_mapping *out, size_t cap);
    /* No backtraces to group by: leaks of the same size are merged as "similar" instead
     * (leak_grouping.h). */
    bool group_by_size;
};

/* Runs in the sweeper: lists the allocations, marks what is reachable from the roots of
 * `capture`, folds and groups the unreachable ones, and writes the result (at most `limit`
 * leaks in detail) to fd with hs_mu_result_write. `arena` is the sweeper's private memory.
 * Returns 0, or a negative error code (also written to fd as a failed result when possible). */
int hs_mu_sweep(const struct hs_mu_capture *capture, const struct hs_mu_heap_source *heap,
                size_t limit, int fd, struct hs_arena *arena);

#endif
