/* collector.h: the capture sequence of the unreachable-memory detector.
 *
 * hs_mu_collect runs in the program's thread that asked for a check (T0):
 *   1. T0: sets up the collector's memory (a private arena that records its mappings, and a
 *      HS_MU_COLLECTOR_STACK_BYTES stack from it, with a guard page), calls heap->disable()
 *      (no tracked allocation or free can complete from now on), and clone()s the collector
 *      with CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED and exit signal 0 (so the
 *      program's SIGCHLD handling and wait() calls never see it), every signal blocked;
 *      allows it to trace the process (prctl(PR_SET_PTRACER); EINVAL, no Yama, is fine),
 *      lets it start (a futex word) and waits, in a futex_wait, for "released".
 *   2. Collector: stops every thread of the process with ptrace, T0 included
 *      (thread_capture.h), copies their registers and /proc/<pid>/maps into a struct
 *      hs_mu_capture in its arena, with the excluded ranges = every mapping of its arena
 *      (its stack is one of them) and the page it shares with the sweeper, calls
 *      heap->enable() (the tables are consistent: all threads are stopped and none is inside
 *      the allocator's critical sections, since disable held every lock), forks the sweeper
 *      with a raw clone(SIGCHLD) (a copy-on-write snapshot; not glibc's fork, which would run
 *      atfork handlers and touch T0's thread descriptor), detaches every thread (signals seen
 *      during the capture are re-delivered then), records the figures, wakes T0, waits for
 *      the sweeper to exit (unless T0 kills it first, in hs_mu_collect_release) and exits
 *      (raw SYS_exit). The sweeper starts its work only once the threads are released (a
 *      word in a page shared with it), so that it does not take a CPU from the collector
 *      during the pause.
 *   3. Sweeper (a single-threaded copy of the process, parent = the collector, killed if the
 *      collector dies): every signal blocked but SIGSEGV and SIGBUS (default action, for
 *      hs_mu_sweep to handle), descriptors other than 0-2 and result_fd closed, then
 *      hs_mu_sweep(capture, heap, limit, result_fd, fresh arena) and a raw SYS_exit_group.
 *   4. T0 returns; the caller reads the result from the pipe, then calls hs_mu_collect_release
 *      (the result is complete: the sweeper's exit is not waited for), hs_mu_collect_finish or
 *      hs_mu_collect_reap, which reap the collector and unmap its memory.
 *
 * Pause guarantee: the program's threads are stopped from the first PTRACE_INTERRUPT to the
 * last PTRACE_DETACH (stats.pause_ns): the capture, reading /proc/<pid>/maps and one fork.
 * The sweep runs while the program runs. Allocations and frees of the program block (in the
 * allocator's locks) from heap->disable() until the collector has stopped every thread and
 * called heap->enable().
 *
 * Timeouts (timeout_ms, measured from the call):
 *   - capture: every thread must be stopped within timeout_ms / 2; otherwise the collector
 *     releases them and the call fails with -ETIMEDOUT. Every wait of the collector while
 *     threads are stopped is bounded (thread_capture.h), so it always gets to releasing them.
 *   - release: T0 waits for "released" until timeout_ms. On expiry, if the collector has not
 *     begun releasing, T0 takes over (its claim is atomic): calls heap->enable() itself if the
 *     collector has not (exactly one of them ever does: a shared flag), SIGKILLs the collector
 *     and the sweeper (the kernel then detaches whatever the collector was tracing, so the
 *     program can never stay stopped), reaps the collector (up to HS_MU_KILL_WAIT_MS) and
 *     fails with -ETIMEDOUT. If the collector is already releasing, T0 waits another
 *     timeout_ms for it before doing the same.
 *   - T0 itself is stopped while the collector holds the threads: its timer only runs before
 *     and after that; the collector's own deadline covers the time in between.
 *   - hs_mu_collect_reap(timeout_ms) / hs_mu_collect_finish (HS_MU_FINISH_WAIT_MS): waits for
 *     the collector (which waits for the sweeper); on expiry SIGKILLs both and waits up to
 *     HS_MU_KILL_WAIT_MS more.
 *
 * Threading and signals: hs_mu_collect is called by one thread at a time (the caller
 * serializes checks); the calling thread must not hold allocator locks, and must not call it
 * from a signal handler. The collector and the sweeper run with T0's TLS (clone inherits the
 * fs register): they use raw system calls, the arena, hs_format and hs_log_tag only; errno of T0
 * is saved and restored. A signal sent to T0 during the call is delivered when it returns.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_COLLECTOR_H
#define HEAPSCOPE_MEMUNREACHABLE_COLLECTOR_H

#include "capture.h"
#include "thread_capture.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The collector's stack; the sweeper runs on a copy of it, so hs_mu_sweep has about this much
 * minus a few KiB. */
#define HS_MU_COLLECTOR_STACK_BYTES (1u << 20)

/* How long T0 waits for a SIGKILLed collector to be reaped. */
#define HS_MU_KILL_WAIT_MS 1000

/* How long hs_mu_collect_finish waits for the sweeper to exit on its own (the result has been
 * read by then, so it is only finishing up). */
#define HS_MU_FINISH_WAIT_MS 2000

struct hs_mu_collector; /* private: the state shared by T0, the collector and the sweeper */

struct hs_mu_collect_stats {
    uint64_t pause_ns;          /* first thread stopped .. last thread released (CLOCK_MONOTONIC) */
    uint64_t capture_ns;        /* first thread stopped .. all threads stopped */
    size_t num_threads;         /* threads captured */
    size_t threads_exited;      /* threads that exited during the capture (not captured) */
    size_t signals_redelivered; /* signals that arrived during the capture, handed back */
    unsigned rounds;            /* listings of /proc/<pid>/task */
    size_t maps_bytes;          /* size of the /proc/<pid>/maps text */
    size_t num_excluded;        /* excluded ranges (the collector's own mappings) */
    size_t collector_bytes;     /* memory the collector's arena had mapped */
    /* What hs_mu_collect_reap needs (0 / NULL: nothing left to reap). */
    pid_t collector_tid;
    pid_t sweeper_pid;
    struct hs_mu_collector *collector;
};

/* Runs the capture sequence (see the header comment) and starts the sweeper, which writes the
 * result to result_fd. Returns 0 once every thread has been released (stats filled; then read
 * the result and call hs_mu_collect_reap), or a negative code with a log line:
 *   -EINVAL     heap or heap->iterate missing, or timeout_ms <= 0
 *   -ENOMEM     the collector's memory could not be mapped
 *   -EPERM      ptrace refused (logged with the likely causes)
 *   -ETIMEDOUT  the capture or the release did not finish in time (see Timeouts)
 *   -EAGAIN     threads kept appearing
 *   other       -errno of a failed step (clone, reading /proc, forking the sweeper, ...).
 * On failure nothing was written to result_fd and nothing is left running, except a collector
 * that a SIGKILL has not finished yet (stats.collector is then set: call hs_mu_collect_reap).
 * heap->disable and heap->enable may be NULL (no-ops). */
int hs_mu_collect(const struct hs_mu_heap_source *heap, size_t limit, int result_fd,
                  struct hs_mu_collect_stats *stats, int timeout_ms);

/* Waits (up to timeout_ms) for the collector of a successful hs_mu_collect, which exits once
 * the sweeper has, reaps it and frees its memory. Call it after reading the result (the sweeper
 * may block on a full pipe until then), whatever hs_mu_collect returned. Returns 0 when the
 * sweeper exited with status 0; -ETIMEDOUT when they had to be killed; -EIO when the sweeper
 * failed or crashed (logged); 0 as well when there is nothing to reap. Afterwards stats holds
 * nothing to reap (a second call is a no-op), except when a killed collector has not exited
 * within HS_MU_KILL_WAIT_MS either (logged; calling again retries). */
int hs_mu_collect_reap(struct hs_mu_collect_stats *stats, int timeout_ms);

/* hs_mu_collect_reap(stats, HS_MU_FINISH_WAIT_MS). */
int hs_mu_collect_finish(struct hs_mu_collect_stats *stats);

/* For a check whose complete result has been read: ends the collector without waiting for the
 * sweeper to exit. The sweeper is done by then, but its exit tears down the snapshot's page
 * tables (tens of milliseconds per GB of heap), which the caller need not wait for: the
 * collector is SIGKILLed and reaped, and the sweeper, killed by its parent-death signal, is
 * reaped by the kernel's reaper of orphans. When that reaper would be the program itself (the
 * program is a child subreaper, or the init of its pid namespace), it waits like
 * hs_mu_collect_finish instead. Returns 0, or what hs_mu_collect_finish returned, or
 * -ETIMEDOUT when the killed collector did not exit within HS_MU_KILL_WAIT_MS (stats still
 * holds it then: hs_mu_collect_reap retries). */
int hs_mu_collect_release(struct hs_mu_collect_stats *stats);

/* Test-only: observation points in the collector (a hook may stall to exercise timeouts). */
enum hs_mu_collect_stage {
    HS_MU_COLLECT_STAGE_STARTED,  /* collector running, nothing stopped yet */
    HS_MU_COLLECT_STAGE_CAPTURED, /* every thread stopped, before heap->enable */
    HS_MU_COLLECT_STAGE_FORKED,   /* the sweeper forked, the threads still stopped */
    HS_MU_COLLECT_STAGE_RELEASED, /* every thread released, before waking T0 */
};

struct hs_mu_collect_test_hooks {
    void (*stage)(enum hs_mu_collect_stage stage, void *arg);
    hs_mu_tc_hook_fn capture; /* passed to the thread capture */
    void *arg;
};

/* Read by hs_mu_collect at each call; zero in production. */
extern struct hs_mu_collect_test_hooks hs_mu_collect_test_hooks;

#endif
