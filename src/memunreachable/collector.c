/* collector.c: the capture sequence (see collector.h): T0's side, the collector (a CLONE_VM
 * task outside the thread group that ptraces every thread) and the sweeper's start.
 *
 * Shared state: one struct hs_mu_collector in the collector's own arena (which records its
 * mappings, so they can be excluded from the roots and unmapped all at once). The arena's
 * struct lives inside the arena's memory: it is built on T0's stack, then moved in.
 *
 * Handshakes (all atomics, futexes private: T0 and the collector share the mm):
 *   go:           0 -> 1 by T0 once the collector may trace it (after PR_SET_PTRACER).
 *   state:        RUNNING -> RELEASING (collector, before detaching anything) -> RELEASED
 *                 (collector, figures written, then futex wake), or RUNNING -> ABANDONED (T0,
 *                 deadline passed). The compare-and-swap on RUNNING decides who owns the end.
 *   enable_state: NONE -> COLLECTOR_BUSY -> COLLECTOR_DONE, or NONE -> T0: whoever moves it
 *                 off NONE calls heap->enable(), so it happens exactly once. The collector
 *                 forks the sweeper only if it did the enable itself (T0 taking over means the
 *                 check is abandoned).
 *   sweeper_reaped: set by the collector once wait4 has returned the sweeper (its pid may be
 *                 recycled from then on, so nobody may signal it any more).
 *
 * errno: the collector and the sweeper share T0's TLS; everything here after the clone uses
 * raw system calls (hs_mu_sys6), and T0 restores its errno before returning. hs_log_tag may touch
 * errno from the collector only while T0 is still inside hs_mu_collect.
 */
#define _GNU_SOURCE
#include "collector.h"

#include "errno_text.h"
#include "format.h"
#include "hs_assert.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Log lines carry the library's tag (lines from the collector show the collector's pid). */
#define mu_log(...) hs_log_tag("memunreachable", __VA_ARGS__)

#define GUARD_BYTES 4096u
#define MAPS_INITIAL_BYTES (64u << 10)

enum { STATE_RUNNING, STATE_RELEASING, STATE_RELEASED, STATE_ABANDONED };
enum { ENABLE_NONE, ENABLE_COLLECTOR_BUSY, ENABLE_COLLECTOR_DONE, ENABLE_T0 };

struct hs_mu_collect_test_hooks hs_mu_collect_test_hooks;

struct hs_mu_collector {
    struct hs_arena arena; /* moved here from T0's stack; owns this struct */
    struct hs_mu_heap_source heap;
    size_t limit;
    int result_fd;
    pid_t pid;
    uint64_t capture_deadline_ns;
    struct hs_mu_collect_test_hooks hooks;

    int go;
    int state;
    int enable_state;
    int error; /* collector's result (0 or negative), valid at RELEASED */
    pid_t collector_tid;
    pid_t sweeper_pid;
    int sweeper_reaped;
    int sweeper_status;

    struct hs_mu_thread_capture tc;
    struct hs_mu_capture capture;
    /* The allocator's own memory (heap.own_memory, listed by T0 after disable): excluded. */
    struct hs_arena_mapping *own;
    size_t num_own;
    struct hs_mu_collect_stats stats;

    /* A page shared with the sweeper (MAP_SHARED, so the fork does not copy it): its first
     * word goes to 1 once every thread has been released. NULL if it could not be mapped. */
    int *released;
};

/* ---- small helpers (raw system calls only) ---- */

static int load(int *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store(int *p, int v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static int cas(int *p, int expected, int desired)
{
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

static void futex_wake(int *word)
{
    hs_mu_sys6(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
}

/* Sleeps while *word == val, until deadline_ns (CLOCK_MONOTONIC, absolute). */
static void futex_wait_until(int *word, int val, uint64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                          (long)(deadline_ns % 1000000000ull)};
    hs_mu_sys6(SYS_futex, (long)word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, val, (long)&ts, 0,
               FUTEX_BITSET_MATCH_ANY);
}

/* Waits until *word == want or the deadline. Returns whether it got there. */
static int wait_word(int *word, int want, uint64_t deadline_ns)
{
    for (;;) {
        int v = load(word);
        if (v == want)
            return 1;
        if (hs_mu_now_ns() >= deadline_ns)
            return 0;
        futex_wait_until(word, v, deadline_ns);
    }
}

static uint64_t ms_to_ns(int ms)
{
    return (uint64_t)ms * 1000000ull;
}

#define SHARED_PAGE 4096u

/* The sweeper waits for the release, at most this long (the collector releases the threads
 * right after forking it; if the collector dies first, so does the sweeper). */
#define RELEASE_WAIT_MS 1000

/* In the sweeper: waits until the collector has released the program's threads (the word in
 * the page shared by both processes), at most RELEASE_WAIT_MS. Freshly forked, the sweeper
 * would otherwise compete with the collector for a CPU while the threads are still stopped:
 * measured with a busy program thread on 2 vCPUs, that added 2-5 ms to every pause. */
static void wait_for_release(int *released)
{
    if (!released)
        return;
    uint64_t deadline = hs_mu_now_ns() + ms_to_ns(RELEASE_WAIT_MS);
    while (__atomic_load_n(released, __ATOMIC_ACQUIRE) == 0) {
        uint64_t now = hs_mu_now_ns();
        if (now >= deadline)
            return;
        struct timespec ts = {(time_t)((deadline - now) / 1000000000ull),
                              (long)((deadline - now) % 1000000000ull)};
        hs_mu_sys6(SYS_futex, (long)released, FUTEX_WAIT, 0, (long)&ts, 0, 0); /* shared */
    }
}

/* Waits for task `tid` (a child of this process, exit signal 0 when clone_child) to exit
 * and reaps it. Returns 1 when reaped (or already reaped elsewhere), 0 on timeout. */
static int reap_task(pid_t tid, int clone_child, uint64_t deadline_ns, int *status)
{
    uint64_t poll = 20000;
    for (;;) {
        int st = 0;
        long r =
            hs_mu_sys6(SYS_wait4, tid, (long)&st, (clone_child ? __WCLONE : 0) | WNOHANG, 0, 0, 0);
        if (r == tid) {
            if (status)
                *status = st;
            return 1;
        }
        if (r < 0 && r != -EINTR)
            return 1; /* ECHILD: not ours any more (someone waited with __WALL) */
        uint64_t now = hs_mu_now_ns();
        if (now >= deadline_ns)
            return 0;
        hs_mu_sleep_ns(poll < deadline_ns - now ? poll : deadline_ns - now);
        if (poll < 2000000)
            poll *= 2;
    }
}

/* ---- the sweeper ---- */

static __attribute__((noreturn)) void sweeper_main(struct hs_mu_collector *c)
{
    /* Die with the collector (T0 SIGKILLs it on timeout); it may already be gone. */
    hs_mu_sys6(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0, 0);
    if (hs_mu_sys6(SYS_getppid, 0, 0, 0, 0, 0, 0) != c->collector_tid)
        hs_mu_sys6(SYS_exit_group, 1, 0, 0, 0, 0, 0);
    wait_for_release(c->released);

    /* Everything stays blocked (the program's handlers must not run here), except the faults
     * hs_mu_sweep handles; they start at their default action. */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } dfl = {SIG_DFL, 0, NULL, 0};
    hs_mu_sys6(SYS_rt_sigaction, SIGSEGV, (long)&dfl, 0, 8, 0, 0);
    hs_mu_sys6(SYS_rt_sigaction, SIGBUS, (long)&dfl, 0, 8, 0, 0);
    uint64_t faults = (1ull << (SIGSEGV - 1)) | (1ull << (SIGBUS - 1));
    hs_mu_sys6(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&faults, 0, 8, 0, 0);

    /* Hold none of the program's descriptors (its peers may wait for EOF). */
    int fd = c->result_fd;
    if (fd > 3)
        hs_mu_sys6(SYS_close_range, 3, fd - 1, 0, 0, 0, 0);
    if (fd >= 3)
        hs_mu_sys6(SYS_close_range, fd + 1, ~0u, 0, 0, 0, 0);
    else
        hs_mu_sys6(SYS_close_range, 3, ~0u, 0, 0, 0, 0);

    struct hs_arena arena = HS_ARENA_INIT;
    hs_arena_use_huge_pages(&arena); /* lists and indexes of every block: dense, written whole */
    int r = hs_mu_sweep(&c->capture, &c->heap, c->limit, c->result_fd, &arena);
    hs_mu_sys6(SYS_exit_group, r < 0 ? 1 : 0, 0, 0, 0, 0, 0);
    __builtin_unreachable();
}

/* Forks the sweeper (raw clone, SIGCHLD, no CLONE_VM). Returns its pid or -errno; does not
 * return in the sweeper. */
static long fork_sweeper(struct hs_mu_collector *c)
{
    long pid = hs_mu_sys6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
    if (pid == 0)
        sweeper_main(c);
    return pid;
}

/* ---- the collector ---- */

static int read_maps(struct hs_mu_collector *c)
{
    char path[64];
    hs_format(path, sizeof(path), "/proc/%d/maps", (int)c->pid);
    long fd = hs_mu_sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) {
        mu_log("collector: cannot open %s: %s", path, hs_errno_text((int)-fd));
        return (int)fd;
    }
    size_t cap = MAPS_INITIAL_BYTES, len = 0;
    char *buf = hs_arena_alloc(&c->arena, cap);
    int err = buf ? 0 : -ENOMEM;
    while (!err) {
        if (cap - len < 4096) {
            char *bigger = hs_arena_alloc(&c->arena, cap * 2);
            if (!bigger) {
                err = -ENOMEM;
                break;
            }
            memcpy(bigger, buf, len);
            hs_arena_free(&c->arena, buf, cap);
            buf = bigger;
            cap *= 2;
        }
        long n = hs_mu_sys6(SYS_read, fd, (long)(buf + len), (long)(cap - len - 1), 0, 0, 0);
        if (n == -EINTR)
            continue;
        if (n < 0)
            err = (int)n;
        else if (n == 0)
            break;
        else
            len += (size_t)n;
    }
    hs_mu_sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (err) {
        mu_log("collector: cannot read %s: %s", path, hs_errno_text(-err));
        return err;
    }
    buf[len] = '\0';
    c->capture.maps_text = buf;
    c->capture.maps_len = len;
    return 0;
}

/* Fills c->capture from the stopped threads, /proc/<pid>/maps and the arena's mappings. */
static int build_capture(struct hs_mu_collector *c)
{
    struct hs_mu_capture *cap = &c->capture;
    struct hs_mu_thread_capture *tc = &c->tc;
    cap->pid = c->pid;
    cap->threads = hs_arena_calloc(&c->arena, (tc->num_stopped + 1) * sizeof(*cap->threads));
    if (!cap->threads)
        return -ENOMEM;
    _Static_assert(sizeof(struct user_regs_struct) / sizeof(uintptr_t) <= HS_MU_MAX_REGS,
                   "hs_mu_thread.regs is too small");
    for (size_t i = 0; i < tc->num_threads; i++) {
        const struct hs_mu_tc_thread *t = &tc->threads[i];
        if (t->state != HS_MU_TC_STOPPED)
            continue;
        struct hs_mu_thread *out = &cap->threads[cap->num_threads++];
        out->tid = t->tid;
        out->sp = (uintptr_t)t->regs.rsp;
        out->num_regs = sizeof(t->regs) / sizeof(uintptr_t);
        memcpy(out->regs, &t->regs, sizeof(t->regs));
    }
    int err = read_maps(c);
    if (err)
        return err;
    /* The excluded ranges: every mapping of the arena (the stack included), counted after
     * the last allocation of the capture (allocating the arrays may add one). */
    for (;;) {
        size_t n = hs_arena_mappings(&c->arena, NULL, 0) + 4 + c->num_own;
        struct hs_mu_range *ranges = hs_arena_alloc(&c->arena, n * sizeof(*ranges));
        struct hs_arena_mapping *maps = hs_arena_alloc(&c->arena, n * sizeof(*maps));
        if (!ranges || !maps)
            return -ENOMEM;
        size_t m = hs_arena_mappings(&c->arena, maps, n);
        if (m > n)
            continue; /* (rare) the arrays lived in new chunks: count again */
        for (size_t i = 0; i < m; i++)
            ranges[i] = (struct hs_mu_range){maps[i].begin, maps[i].end};
        if (c->released) /* n >= m + 4 + num_own: room for it and the allocator's ranges */
            ranges[m++] =
                (struct hs_mu_range){(uintptr_t)c->released, (uintptr_t)c->released + SHARED_PAGE};
        for (size_t i = 0; i < c->num_own; i++)
            ranges[m++] = (struct hs_mu_range){c->own[i].begin, c->own[i].end};
        cap->excluded = ranges;
        cap->num_excluded = m;
        return 0;
    }
}

/* Calls heap->enable unless T0 has taken that over. Returns whether the collector did it. */
static int collector_enable(struct hs_mu_collector *c)
{
    if (!cas(&c->enable_state, ENABLE_NONE, ENABLE_COLLECTOR_BUSY))
        return 0;
    if (c->heap.enable)
        c->heap.enable();
    store(&c->enable_state, ENABLE_COLLECTOR_DONE);
    return 1;
}

static void stage(struct hs_mu_collector *c, enum hs_mu_collect_stage s)
{
    if (c->hooks.stage)
        c->hooks.stage(s, c->hooks.arg);
}

static __attribute__((noreturn)) void collector_exit(void)
{
    for (;;)
        hs_mu_sys6(SYS_exit, 0, 0, 0, 0, 0, 0);
}

static int collector_main(void *arg)
{
    struct hs_mu_collector *c = arg;
    int err = 0;
    if (!wait_word(&c->go, 1, c->capture_deadline_ns))
        err = -ETIMEDOUT;
    if (!err) {
        stage(c, HS_MU_COLLECT_STAGE_STARTED);
        err = hs_mu_tc_stop_all(&c->tc, c->capture_deadline_ns);
        if (err > 0)
            err = 0;
    }
    if (!err) {
        stage(c, HS_MU_COLLECT_STAGE_CAPTURED);
        err = build_capture(c);
        if (err == -ENOMEM)
            mu_log("collector: out of memory for the capture");
    }
    /* Enable in every case (the threads are still stopped on success). */
    if (!collector_enable(c) && !err)
        err = -ETIMEDOUT; /* T0 gave up meanwhile: no snapshot */
    if (!err) {
        long pid = fork_sweeper(c);
        if (pid < 0) {
            mu_log("collector: cannot fork the sweeper: %s", hs_errno_text((int)-pid));
            err = (int)pid;
        } else {
            __atomic_store_n(&c->sweeper_pid, (pid_t)pid, __ATOMIC_RELEASE);
            stage(c, HS_MU_COLLECT_STAGE_FORKED);
        }
    }

    /* The end belongs to whoever moves state off RUNNING. */
    int mine = cas(&c->state, STATE_RUNNING, STATE_RELEASING);
    hs_mu_tc_release_all(&c->tc, hs_mu_now_ns() + 100000000ull);
    if (c->released) {
        __atomic_store_n(c->released, 1, __ATOMIC_RELEASE);
        hs_mu_sys6(SYS_futex, (long)c->released, FUTEX_WAKE, INT_MAX, 0, 0, 0); /* shared */
    }
    if (!mine) {
        /* Only T0 moves state off RUNNING besides us, and only to ABANDONED. */
        hs_assert(load(&c->state) == STATE_ABANDONED);
        collector_exit(); /* T0 is killing us and the sweeper */
    }

    struct hs_mu_thread_capture *tc = &c->tc;
    struct hs_mu_collect_stats *s = &c->stats;
    if (tc->first_stop_ns) {
        s->pause_ns = tc->released_ns - tc->first_stop_ns;
        if (tc->all_stopped_ns)
            s->capture_ns = tc->all_stopped_ns - tc->first_stop_ns;
    }
    s->num_threads = c->capture.num_threads;
    s->threads_exited = tc->num_gone;
    s->signals_redelivered = tc->num_signals;
    s->rounds = tc->rounds;
    s->maps_bytes = c->capture.maps_len;
    s->num_excluded = c->capture.num_excluded;
    s->collector_bytes = hs_arena_mapped_bytes(&c->arena);
    c->error = err;
    stage(c, HS_MU_COLLECT_STAGE_RELEASED);
    store(&c->state, STATE_RELEASED);
    futex_wake(&c->state);

    /* From here on T0 runs the program again: no errno, no logging. */
    pid_t sweeper = __atomic_load_n(&c->sweeper_pid, __ATOMIC_ACQUIRE);
    if (sweeper > 0) {
        int st = 0;
        long r;
        do
            r = hs_mu_sys6(SYS_wait4, sweeper, (long)&st, __WALL, 0, 0, 0);
        while (r == -EINTR);
        c->sweeper_status = st;
        store(&c->sweeper_reaped, 1);
    }
    collector_exit();
}

/* ---- T0's side ---- */

static void kill_task(pid_t pid)
{
    if (pid > 0)
        hs_mu_sys6(SYS_kill, pid, SIGKILL, 0, 0, 0, 0);
}

/* Unmaps the collector's memory (its stack included): only once it has exited. */
static void free_collector(struct hs_mu_collect_stats *stats, struct hs_mu_collector *c)
{
    int *released = c->released;
    hs_arena_destroy(&c->arena); /* c itself lives there */
    if (released)
        munmap(released, SHARED_PAGE);
    stats->collector = NULL;
    stats->collector_tid = 0;
    stats->sweeper_pid = 0;
}

/* Kills the sweeper (while its pid cannot have been recycled) and the collector, and reaps
 * the collector. Returns whether it was reaped. */
static int kill_and_reap(struct hs_mu_collector *c)
{
    if (!load(&c->sweeper_reaped))
        kill_task(__atomic_load_n(&c->sweeper_pid, __ATOMIC_ACQUIRE));
    kill_task(c->collector_tid);
    return reap_task(c->collector_tid, 1, hs_mu_now_ns() + ms_to_ns(HS_MU_KILL_WAIT_MS), NULL);
}

/* T0's deadline passed and the collector did not release in time: take over. */
static int abandon(struct hs_mu_collector *c, const struct hs_mu_heap_source *heap,
                   struct hs_mu_collect_stats *stats)
{
    if (cas(&c->enable_state, ENABLE_NONE, ENABLE_T0)) {
        if (heap->enable)
            heap->enable();
    } else {
        /* The collector took it off NONE: it is inside heap->enable() or done with it. */
        int enable_state = load(&c->enable_state);
        hs_assert(enable_state == ENABLE_COLLECTOR_BUSY || enable_state == ENABLE_COLLECTOR_DONE);
        if (!wait_word(&c->enable_state, ENABLE_COLLECTOR_DONE, hs_mu_now_ns() + 100000000ull))
            mu_log("collector: stuck inside heap->enable(); the allocator may stay locked");
    }
    int reaped = kill_and_reap(c);
    mu_log("collector: timed out; the collector was killed (the kernel released the threads "
           "it held)");
    if (reaped) {
        free_collector(stats, c);
    } else {
        mu_log("collector: the killed collector (task %d) has not exited yet",
               (int)c->collector_tid);
        stats->collector = c;
        stats->collector_tid = c->collector_tid;
    }
    return -ETIMEDOUT;
}

/* T0, after disable: the allocator's own memory, into the collector's arena (none when it
 * cannot say, or memory runs out: then it is scanned as roots, as any other memory). */
static void list_own_memory(struct hs_mu_collector *c, const struct hs_mu_heap_source *heap)
{
    if (!heap->own_memory)
        return;
    size_t want = heap->own_memory(NULL, 0);
    if (want == 0)
        return;
    size_t cap = want + 16; /* (the list is stable under disable; a margin all the same) */
    struct hs_arena_mapping *own = hs_arena_alloc(&c->arena, cap * sizeof(*own));
    if (!own)
        return;
    size_t n = heap->own_memory(own, cap);
    c->own = own;
    c->num_own = n < cap ? n : cap;
}

static int collect(const struct hs_mu_heap_source *heap, size_t limit, int result_fd,
                   struct hs_mu_collect_stats *stats, int timeout_ms)
{
    uint64_t start = hs_mu_now_ns();
    uint64_t deadline = start + ms_to_ns(timeout_ms);

    /* The collector's memory. The arena's struct is moved into its own first block. */
    struct hs_arena tmp = HS_ARENA_INIT;
    hs_arena_track_mappings(&tmp);
    struct hs_mu_collector *c = hs_arena_calloc(&tmp, sizeof(*c));
    if (!c) {
        hs_arena_destroy(&tmp);
        mu_log("collector: out of memory");
        return -ENOMEM;
    }
    c->arena = tmp;
    size_t stack_bytes = HS_MU_COLLECTOR_STACK_BYTES + GUARD_BYTES;
    char *stack = hs_arena_alloc(&c->arena, stack_bytes);
    if (!stack || ((uintptr_t)stack & (GUARD_BYTES - 1)) ||
        mprotect(stack, GUARD_BYTES, PROT_NONE) != 0) {
        hs_arena_destroy(&c->arena);
        mu_log("collector: cannot map the collector's stack");
        return -ENOMEM;
    }
    void *shared =
        mmap(NULL, SHARED_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c->released = shared == MAP_FAILED ? NULL : shared;
    c->heap = *heap;
    c->limit = limit;
    c->result_fd = result_fd;
    c->pid = getpid();
    c->capture_deadline_ns = start + ms_to_ns(timeout_ms) / 2;
    c->hooks = hs_mu_collect_test_hooks;
    hs_mu_tc_init(&c->tc, c->pid, &c->arena);
    c->tc.hook = c->hooks.capture;
    c->tc.hook_arg = c->hooks.arg;

    if (heap->disable)
        heap->disable();
    list_own_memory(c, heap);

    /* Every signal blocked in the collector (and so in the sweeper): the program's handlers
     * must never run there. Raw, so that glibc's internal signals are blocked too; T0's mask
     * is back right after the clone. */
    uint64_t all = ~0ull, old = 0;
    hs_mu_sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8, 0, 0);
    int tid = clone(collector_main, stack + stack_bytes,
                    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED, c);
    int clone_errno = errno;
    hs_mu_sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
    if (tid < 0) {
        if (heap->enable)
            heap->enable();
        if (c->released)
            munmap(c->released, SHARED_PAGE);
        hs_arena_destroy(&c->arena);
        mu_log("collector: clone failed: %s", hs_errno_text(clone_errno));
        return -clone_errno;
    }
    c->collector_tid = tid; /* published to the collector by the release store of go */

    long r = hs_mu_sys6(SYS_prctl, PR_SET_PTRACER, tid, 0, 0, 0, 0);
    if (r < 0 && r != -EINVAL)
        mu_log("collector: prctl(PR_SET_PTRACER) failed: %s", hs_errno_text((int)-r));
    store(&c->go, 1);
    futex_wake(&c->go);

    if (!wait_word(&c->state, STATE_RELEASED, deadline)) {
        if (cas(&c->state, STATE_RUNNING, STATE_ABANDONED))
            return abandon(c, heap, stats);
        /* The collector moved it first: it is releasing, or has released since. */
        hs_assert(load(&c->state) == STATE_RELEASING || load(&c->state) == STATE_RELEASED);
        /* The collector is releasing the threads: give it as long again. */
        if (!wait_word(&c->state, STATE_RELEASED, hs_mu_now_ns() + ms_to_ns(timeout_ms)))
            return abandon(c, heap, stats);
    }

    int err = c->error;
    *stats = c->stats;
    stats->collector = c;
    stats->collector_tid = tid;
    stats->sweeper_pid = c->sweeper_pid;
    if (err < 0) {
        /* No sweeper: the collector exits right away. */
        if (reap_task(tid, 1, hs_mu_now_ns() + ms_to_ns(HS_MU_KILL_WAIT_MS), NULL) ||
            kill_and_reap(c))
            free_collector(stats, c);
    }
    return err;
}

int hs_mu_collect(const struct hs_mu_heap_source *heap, size_t limit, int result_fd,
                  struct hs_mu_collect_stats *stats, int timeout_ms)
{
    memset(stats, 0, sizeof(*stats));
    if (!heap || !heap->iterate || timeout_ms <= 0)
        return -EINVAL;
    int saved_errno = errno;
    int r = collect(heap, limit, result_fd, stats, timeout_ms);
    errno = saved_errno;
    return r;
}

int hs_mu_collect_reap(struct hs_mu_collect_stats *stats, int timeout_ms)
{
    struct hs_mu_collector *c = stats->collector;
    if (!c)
        return 0;
    int saved_errno = errno;
    int ret = 0;
    uint64_t deadline = hs_mu_now_ns() + ms_to_ns(timeout_ms > 0 ? timeout_ms : 0);
    if (!reap_task(stats->collector_tid, 1, deadline, NULL)) {
        mu_log("collector: the sweeper did not finish in %d ms; killing it", timeout_ms);
        ret = -ETIMEDOUT;
        if (!kill_and_reap(c)) {
            mu_log("collector: the killed collector (task %d) has not exited yet",
                   (int)stats->collector_tid);
            errno = saved_errno;
            return ret;
        }
    } else if (load(&c->sweeper_reaped)) {
        int st = c->sweeper_status;
        if (WIFSIGNALED(st)) {
            mu_log("collector: the sweeper was killed by signal %d", WTERMSIG(st));
            ret = -EIO;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
            mu_log("collector: the sweeper failed (exit status %d)", WEXITSTATUS(st));
            ret = -EIO;
        }
    }
    free_collector(stats, c);
    errno = saved_errno;
    return ret;
}

int hs_mu_collect_finish(struct hs_mu_collect_stats *stats)
{
    return hs_mu_collect_reap(stats, HS_MU_FINISH_WAIT_MS);
}

/* True when a process orphaned by the collector goes to someone other than the program: the
 * kernel hands orphans to the nearest child subreaper among their ancestors, else to the init
 * of the pid namespace, and the program is the collector's parent. */
static int orphans_leave_the_program(void)
{
    int subreaper = 0;
    if (hs_mu_sys6(SYS_prctl, PR_GET_CHILD_SUBREAPER, (long)&subreaper, 0, 0, 0, 0) != 0 ||
        subreaper)
        return 0;
    return hs_mu_sys6(SYS_getpid, 0, 0, 0, 0, 0, 0) != 1;
}

int hs_mu_collect_release(struct hs_mu_collect_stats *stats)
{
    struct hs_mu_collector *c = stats->collector;
    if (!c)
        return 0;
    if (!orphans_leave_the_program())
        return hs_mu_collect_finish(stats);
    int saved_errno = errno;
    /* The collector only waits for the sweeper's exit now. Killing it sends the sweeper its
     * parent-death SIGKILL; the kernel then reaps the sweeper's snapshot on its own time. */
    kill_task(stats->collector_tid);
    int ret = 0;
    if (reap_task(stats->collector_tid, 1, hs_mu_now_ns() + ms_to_ns(HS_MU_KILL_WAIT_MS), NULL)) {
        free_collector(stats, c);
    } else {
        mu_log("collector: the killed collector (task %d) has not exited yet",
               (int)stats->collector_tid);
        ret = -ETIMEDOUT;
    }
    errno = saved_errno;
    return ret;
}
