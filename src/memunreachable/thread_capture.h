/* thread_capture.h: stop every thread of a process with ptrace, read their registers, and
 * let them go again.
 *
 * Used by the unreachable-memory collector (collector.c), a task that shares the program's
 * address space (CLONE_VM) but is not in its thread group, so it may trace all of the
 * program's threads, including the one that created it.
 *
 * Capture (hs_mu_tc_stop_all), in rounds:
 *   1. list /proc/<pid>/task with raw getdents64 (opendir would malloc);
 *   2. PTRACE_SEIZE then PTRACE_INTERRUPT every thread not seen before;
 *   3. wait (waitpid(tid, __WALL | WNOHANG) for each, short nanosleeps between passes) until
 *      each of them is stopped or gone, and read its registers (PTRACE_GETREGSET,
 *      NT_PRSTATUS);
 *   4. list again; stop when a listing shows no new thread (at most HS_MU_TC_MAX_ROUNDS).
 * A thread that is gone (ESRCH on seize, an exit seen while waiting, a zombie) is dropped. A
 * thread that reports a signal-delivery-stop instead of the interrupt stop is stopped too; the
 * signal is remembered and re-delivered when the thread is released (PTRACE_DETACH with that
 * signal), so the program's handler runs afterwards, once. A thread id that is reused by a new
 * thread during one capture is not seen again (tids are recycled only after pid_max others).
 *
 * Release (hs_mu_tc_release_all): PTRACE_DETACH every stopped thread, with its pending
 * signal. A thread seized but never seen stopping (only after a failure) is given a short
 * grace period; if it still cannot be detached it stays attached until the capturing task
 * exits, which the kernel treats as a detach (so the capturing task must exit soon after a
 * failure: the collector does).
 *
 * Invariants: every wait has a deadline (CLOCK_MONOTONIC nanoseconds); on any failure
 * hs_mu_tc_stop_all has already released what it captured. All memory comes from the arena
 * given to hs_mu_tc_init; nothing here calls malloc, stdio or pthread functions, so it may run
 * in a CLONE_VM task that borrows another thread's TLS.
 *
 * Threading: one capture belongs to one task (ptrace tracees belong to the task that seized
 * them). Waiting names each thread, so the task's own children are left alone.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_THREAD_CAPTURE_H
#define HEAPSCOPE_MEMUNREACHABLE_THREAD_CAPTURE_H

#include "arena.h"
#include "hash_table.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* Listings of /proc/<pid>/task before giving up on a process that keeps creating threads. */
#define HS_MU_TC_MAX_ROUNDS 64

enum hs_mu_tc_state {
    HS_MU_TC_WAITING, /* seized and interrupted; its stop has not been seen yet */
    HS_MU_TC_STOPPED, /* stopped, registers read */
    HS_MU_TC_GONE,    /* exited (or a zombie): not captured */
    HS_MU_TC_RELEASED /* detached */
};

struct hs_mu_tc_thread {
    pid_t tid;
    int state;                    /* enum hs_mu_tc_state */
    int pending_signal;           /* seen at its stop; re-delivered at detach (0: none) */
    struct user_regs_struct regs; /* valid when STOPPED (and RELEASED after that) */
};

/* Test-only observation points (hook may stall to exercise timeouts and races). */
enum hs_mu_tc_event {
    HS_MU_TC_EVENT_LISTED,      /* a listing is done (tid 0), before seizing its new threads */
    HS_MU_TC_EVENT_SEIZED,      /* tid was seized, before PTRACE_INTERRUPT */
    HS_MU_TC_EVENT_ALL_STOPPED, /* every thread is stopped (tid 0), before returning */
};
typedef void (*hs_mu_tc_hook_fn)(enum hs_mu_tc_event event, pid_t tid, void *arg);

/* The tid index (hash_table.h, in the arena): a thread's position + 1, keyed by its tid read
 * through ctx, the capture; 0 marks an empty slot. */
struct hs_mu_thread_capture;
static inline uint64_t hs_mu_tc_tid_hash(const pid_t *tid, const void *ctx);
static inline uint64_t hs_mu_tc_entry_hash(const int32_t *pos1, const void *ctx);
static inline bool hs_mu_tc_entry_matches(const int32_t *pos1, const pid_t *tid, const void *ctx);
static inline bool hs_mu_tc_entry_is_empty(const int32_t *pos1)
{
    return *pos1 == 0;
}
static inline void hs_mu_tc_entry_clear(int32_t *pos1)
{
    *pos1 = 0;
}
HS_HASH_TABLE_DEFINE(hs_mu_tc_index, int32_t, pid_t, hs_mu_tc_tid_hash, hs_mu_tc_entry_hash,
                     hs_mu_tc_entry_matches, hs_mu_tc_entry_is_empty, hs_mu_tc_entry_clear)

struct hs_mu_thread_capture {
    pid_t pid;
    struct hs_arena *arena;
    struct hs_mu_tc_thread *threads; /* every thread seen, gone ones included */
    size_t num_threads, cap_threads;
    struct hs_mu_tc_index index; /* tid -> position + 1 */
    /* Figures. */
    size_t num_waiting;      /* threads WAITING */
    size_t num_stopped;      /* threads captured (STOPPED) */
    size_t num_gone;         /* threads that exited during the capture */
    size_t num_signals;      /* signals seen at a stop, to be re-delivered */
    unsigned rounds;         /* listings of /proc/<pid>/task */
    uint64_t first_stop_ns;  /* CLOCK_MONOTONIC at the first PTRACE_INTERRUPT (0: none) */
    uint64_t all_stopped_ns; /* when the last thread was seen stopped */
    uint64_t released_ns;    /* after the last PTRACE_DETACH */
    int last_error;          /* errno of the failure that ended a capture, for the log */
    /* Test-only. */
    hs_mu_tc_hook_fn hook;
    void *hook_arg;
};

static inline uint64_t hs_mu_tc_tid_hash(const pid_t *tid, const void *ctx)
{
    (void)ctx;
    return (uint32_t)*tid;
}
static inline uint64_t hs_mu_tc_entry_hash(const int32_t *pos1, const void *ctx)
{
    const struct hs_mu_thread_capture *tc = ctx;
    return hs_mu_tc_tid_hash(&tc->threads[*pos1 - 1].tid, ctx);
}
static inline bool hs_mu_tc_entry_matches(const int32_t *pos1, const pid_t *tid, const void *ctx)
{
    const struct hs_mu_thread_capture *tc = ctx;
    return tc->threads[*pos1 - 1].tid == *tid;
}

/* Monotonic clock in nanoseconds. */
uint64_t hs_mu_now_ns(void);

/* A raw x86_64 system call: returns the kernel's value, -errno on failure, and never touches
 * errno (the collector runs with the program thread's TLS, whose errno that thread may be
 * using at the same moment). */
static inline long hs_mu_sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* Sleeps for `ns` nanoseconds (raw nanosleep; an interruption ends the sleep early). */
void hs_mu_sleep_ns(uint64_t ns);

/* Prepares an empty capture of process `pid` (a thread group id) using `arena`. */
void hs_mu_tc_init(struct hs_mu_thread_capture *tc, pid_t pid, struct hs_arena *arena);

/* Stops every thread of the process (see the header comment) by `deadline_ns`
 * (hs_mu_now_ns() scale). Returns the number of threads stopped (>= 0), or on failure, after
 * releasing everything, a negative code, with a log line:
 *   -EPERM      ptrace refused (the line names the likely causes)
 *   -ETIMEDOUT  a thread did not stop by the deadline
 *   -EAGAIN     threads kept appearing for HS_MU_TC_MAX_ROUNDS listings
 *   -ENOMEM     the arena could not grow
 *   other       -errno of a failed open/getdents64/ptrace/waitpid.
 * Registers of stopped threads are in threads[i].regs. */
int hs_mu_tc_stop_all(struct hs_mu_thread_capture *tc, uint64_t deadline_ns);

/* Detaches every stopped thread, re-delivering pending signals (idempotent). Threads seized
 * but not yet seen stopping are waited for until grace_deadline_ns at most. Sets released_ns.
 * Returns the number of threads that could not be detached (0 normally). */
size_t hs_mu_tc_release_all(struct hs_mu_thread_capture *tc, uint64_t grace_deadline_ns);

/* Returns the capture's memory to its arena (after release). */
void hs_mu_tc_free(struct hs_mu_thread_capture *tc);

#endif
