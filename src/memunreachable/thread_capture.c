/* thread_capture.c: stop, inspect and release every thread of a process with ptrace (see
 * thread_capture.h).
 *
 * Runs in the collector, a CLONE_VM task borrowing the program thread's TLS: only raw system
 * calls (hs_mu_sys6, which never writes errno), the arena, hs_format and hs_log_tag. No malloc,
 * no stdio, no pthread calls.
 */
#define _GNU_SOURCE
#include "thread_capture.h"

#include "errno_text.h"
#include "format.h"
#include "log.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

/* Log lines carry the library's tag (lines from the collector show the collector's pid). */
#define mu_log(...) hs_log_tag("memunreachable", __VA_ARGS__)

/* How long to poll between waitpid(WNOHANG) calls that found nothing: starts short (a thread
 * usually stops within microseconds), doubles up to the maximum. */
#define POLL_MIN_NS 20000ull
#define POLL_MAX_NS 1000000ull

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

uint64_t hs_mu_now_ns(void)
{
    struct timespec ts;
    hs_mu_sys6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hs_mu_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    hs_mu_sys6(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
}

static long pt(long request, pid_t tid, long addr, long data)
{
    return hs_mu_sys6(SYS_ptrace, request, tid, addr, data, 0, 0);
}

void hs_mu_tc_init(struct hs_mu_thread_capture *tc, pid_t pid, struct hs_arena *arena)
{
    memset(tc, 0, sizeof(*tc));
    tc->pid = pid;
    tc->arena = arena;
    const struct hs_table_alloc in_arena = {hs_arena_table_alloc, hs_arena_table_free, arena};
    hs_mu_tc_index_init(&tc->index, &in_arena, tc, 50);
}

/* ---- Table of threads: an array in discovery order plus a tid index (hash_table.h) ---- */

static struct hs_mu_tc_thread *find_thread(struct hs_mu_thread_capture *tc, pid_t tid)
{
    const int32_t *pos1 = hs_mu_tc_index_find(&tc->index, &tid);
    return pos1 ? &tc->threads[*pos1 - 1] : NULL;
}

static void index_insert(struct hs_mu_thread_capture *tc, size_t pos)
{
    hs_mu_tc_index_put(&tc->index, &(int32_t){(int32_t)(pos + 1)});
}

/* Makes room for one more thread. Returns 0 or -ENOMEM. */
static int grow(struct hs_mu_thread_capture *tc)
{
    if (!hs_mu_tc_index_reserve(&tc->index, 1))
        return -ENOMEM;
    if (tc->num_threads < tc->cap_threads)
        return 0;
    size_t cap = tc->cap_threads ? tc->cap_threads * 2 : 64;
    if (cap > INT32_MAX / 4)
        return -ENOMEM;
    struct hs_mu_tc_thread *threads = hs_arena_alloc(tc->arena, cap * sizeof(*threads));
    if (!threads)
        return -ENOMEM;
    if (tc->threads)
        memcpy(threads, tc->threads, tc->num_threads * sizeof(*threads));
    hs_arena_free(tc->arena, tc->threads, tc->cap_threads * sizeof(*threads));
    tc->threads = threads;
    tc->cap_threads = cap;
    return 0;
}

static int parse_tid(const char *name, pid_t *out)
{
    long v = 0;
    if (!*name)
        return 0;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000)
            return 0;
        v = v * 10 + (*p - '0');
    }
    *out = (pid_t)v;
    return v > 0;
}

/* Appends every thread of the listing not seen before (state WAITING is set later, by
 * seizing). Returns 0 or -errno. */
static int list_threads(struct hs_mu_thread_capture *tc)
{
    char path[64];
    hs_format(path, sizeof(path), "/proc/%d/task", (int)tc->pid);
    long fd =
        hs_mu_sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return (int)fd;
    _Alignas(8) char buf[8192];
    int err = 0;
    for (;;) {
        long n = hs_mu_sys6(SYS_getdents64, fd, (long)buf, sizeof(buf), 0, 0, 0);
        if (n <= 0) {
            err = (int)n;
            break;
        }
        for (long off = 0; off < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + off);
            off += d->d_reclen;
            pid_t tid;
            if (!parse_tid(d->d_name, &tid) || find_thread(tc, tid))
                continue;
            if ((err = grow(tc)) < 0)
                goto out;
            struct hs_mu_tc_thread *t = &tc->threads[tc->num_threads];
            memset(t, 0, sizeof(*t));
            t->tid = tid;
            t->state = HS_MU_TC_GONE; /* until seized */
            index_insert(tc, tc->num_threads++);
        }
    }
out:
    hs_mu_sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    return err;
}

/* Reads a line's value from /proc/<pid>/task/<tid>/status ("TracerPid:") or the state letter
 * of /proc/<pid>/task/<tid>/stat. Returns -1 when the file cannot be read. */
static long read_proc_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t cap)
{
    char path[96];
    hs_format(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
    long fd = hs_mu_sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return -1;
    long n = hs_mu_sys6(SYS_read, fd, (long)buf, (long)cap - 1, 0, 0, 0);
    hs_mu_sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* True when the thread is gone or a zombie (ptrace refuses to attach to those with EPERM). */
static int thread_is_dead(pid_t pid, pid_t tid)
{
    char buf[512];
    if (read_proc_file(pid, tid, "stat", buf, sizeof(buf)) < 0)
        return 1;
    const char *paren = strrchr(buf, ')'); /* the name may contain ')' */
    if (!paren || paren[1] != ' ')
        return 0;
    return paren[2] == 'Z' || paren[2] == 'X' || paren[2] == 'x';
}

static long tracer_of(pid_t pid, pid_t tid)
{
    char buf[2048];
    if (read_proc_file(pid, tid, "status", buf, sizeof(buf)) < 0)
        return 0;
    const char *p = strstr(buf, "TracerPid:");
    if (!p)
        return 0;
    p += strlen("TracerPid:");
    while (*p == ' ' || *p == '\t')
        p++;
    long v = 0;
    while (*p >= '0' && *p <= '9')
        v = v * 10 + (*p++ - '0');
    return v;
}

/* The command name of process pid (its /proc comm), "?" when it cannot be read. */
static void comm_of(long pid, char *out, size_t cap)
{
    char path[64];
    hs_format(path, sizeof(path), "/proc/%ld/comm", pid);
    long fd = hs_mu_sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    long n = fd >= 0 ? hs_mu_sys6(SYS_read, fd, (long)out, (long)cap - 1, 0, 0, 0) : -1;
    if (fd >= 0)
        hs_mu_sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n <= 0) {
        hs_format(out, cap, "?");
        return;
    }
    out[n] = '\0';
    if (out[n - 1] == '\n')
        out[n - 1] = '\0';
}

static void log_refused(struct hs_mu_thread_capture *tc, pid_t tid, int err)
{
    long tracer = tracer_of(tc->pid, tid);
    char comm[32];
    if (tracer != 0)
        comm_of(tracer, comm, sizeof(comm));
    if (tracer != 0 && strcmp(comm, "heapscope") == 0)
        mu_log("thread capture: ptrace(PTRACE_SEIZE) of thread %d refused (%s): it is already "
               "traced by process %ld (heapscope): another heapscope command is working on "
               "this process; try again when it is done",
               (int)tid, hs_errno_text(err), tracer);
    else if (tracer != 0)
        mu_log("thread capture: ptrace(PTRACE_SEIZE) of thread %d refused (%s): it is already "
               "traced by process %ld (%s)",
               (int)tid, hs_errno_text(err), tracer, comm);
    else
        mu_log("thread capture: ptrace(PTRACE_SEIZE) of thread %d refused (%s); likely causes: "
               "Yama (/proc/sys/kernel/yama/ptrace_scope), a seccomp filter, a container "
               "without CAP_SYS_PTRACE, or the process being traced already by a debugger",
               (int)tid, hs_errno_text(err));
}

static void mark_gone(struct hs_mu_thread_capture *tc, struct hs_mu_tc_thread *t)
{
    if (t->state == HS_MU_TC_WAITING)
        tc->num_waiting--;
    else if (t->state == HS_MU_TC_STOPPED)
        tc->num_stopped--;
    if (t->state != HS_MU_TC_GONE)
        tc->num_gone++;
    t->state = HS_MU_TC_GONE;
}

/* Seizes and interrupts one newly listed thread. Returns 0 (WAITING, or dropped when gone)
 * or a negative code. */
static int seize(struct hs_mu_thread_capture *tc, struct hs_mu_tc_thread *t)
{
    long r = pt(PTRACE_SEIZE, t->tid, 0, 0);
    if (r == -ESRCH || (r == -EPERM && thread_is_dead(tc->pid, t->tid))) {
        tc->num_gone++; /* exited since the listing (or a zombie): stays GONE */
        return 0;
    }
    if (r < 0) {
        if (r == -EPERM)
            log_refused(tc, t->tid, EPERM);
        else
            mu_log("thread capture: ptrace(PTRACE_SEIZE) of thread %d failed: %s", (int)t->tid,
                   hs_errno_text((int)-r));
        return (int)r;
    }
    t->state = HS_MU_TC_WAITING;
    tc->num_waiting++;
    if (tc->hook)
        tc->hook(HS_MU_TC_EVENT_SEIZED, t->tid, tc->hook_arg);
    if (!tc->first_stop_ns)
        tc->first_stop_ns = hs_mu_now_ns();
    /* ESRCH here means the thread is exiting; as our tracee, its exit is reported to
     * waitpid, which settles it. */
    pt(PTRACE_INTERRUPT, t->tid, 0, 0);
    return 0;
}

/* Applies one waitpid status of a tracee. */
static void on_status(struct hs_mu_thread_capture *tc, pid_t tid, int status)
{
    struct hs_mu_tc_thread *t = find_thread(tc, tid);
    if (!t)
        return;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        mark_gone(tc, t);
        return;
    }
    if (!WIFSTOPPED(status) || t->state != HS_MU_TC_WAITING)
        return;
    int event = (status >> 16) & 0xff;
    if (event == 0) {
        /* Signal-delivery-stop: the signal is suppressed unless we hand it back at detach. */
        t->pending_signal = WSTOPSIG(status);
        tc->num_signals++;
    }
    struct iovec iov = {&t->regs, sizeof(t->regs)};
    long r = pt(PTRACE_GETREGSET, tid, NT_PRSTATUS, (long)&iov);
    if (r < 0) {
        /* Killed while stopped (SIGKILL does that): its exit is reported later. */
        if (t->pending_signal)
            tc->num_signals--;
        mark_gone(tc, t);
        return;
    }
    t->state = HS_MU_TC_STOPPED;
    tc->num_waiting--;
    tc->num_stopped++;
    tc->all_stopped_ns = hs_mu_now_ns();
}

/* Waits until none of threads[first..] is WAITING. Returns 0, -ETIMEDOUT or -errno.
 *
 * Per-thread waitpid(tid, WNOHANG) passes, in the order the threads were interrupted (the
 * order they tend to stop in): the kernel looks a pid up directly, while waitpid(-1) walks the
 * whole tracee list on every call, quadratic over a round (30 ms for 1024 threads). */
static int wait_stops(struct hs_mu_thread_capture *tc, size_t first, uint64_t deadline_ns)
{
    uint64_t poll = POLL_MIN_NS;
    while (tc->num_waiting > 0) {
        size_t progress = 0;
        for (size_t i = first; i < tc->num_threads; i++) {
            struct hs_mu_tc_thread *t = &tc->threads[i];
            if (t->state != HS_MU_TC_WAITING)
                continue;
            int status = 0;
            long r = hs_mu_sys6(SYS_wait4, t->tid, (long)&status, __WALL | WNOHANG, 0, 0, 0);
            if (r == t->tid) {
                on_status(tc, t->tid, status);
                progress++;
            } else if (r == -ECHILD) {
                mark_gone(tc, t); /* no longer our tracee: it is gone */
                progress++;
            } else if (r < 0 && r != -EINTR) {
                mu_log("thread capture: waitpid(%d) failed: %s", (int)t->tid,
                       hs_errno_text((int)-r));
                return (int)r;
            }
        }
        if (progress) {
            poll = POLL_MIN_NS;
            continue;
        }
        uint64_t now = hs_mu_now_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        hs_mu_sleep_ns(poll < deadline_ns - now ? poll : deadline_ns - now);
        if (poll < POLL_MAX_NS)
            poll *= 2;
    }
    return 0;
}

int hs_mu_tc_stop_all(struct hs_mu_thread_capture *tc, uint64_t deadline_ns)
{
    int err = 0;
    for (;;) {
        if (tc->rounds >= HS_MU_TC_MAX_ROUNDS) {
            err = -EAGAIN;
            mu_log("thread capture: threads of process %d kept appearing for %u listings",
                   (int)tc->pid, tc->rounds);
            break;
        }
        if (hs_mu_now_ns() >= deadline_ns) {
            err = -ETIMEDOUT;
            break;
        }
        size_t first_new = tc->num_threads;
        err = list_threads(tc);
        tc->rounds++;
        if (err < 0) {
            mu_log("thread capture: cannot list /proc/%d/task: %s", (int)tc->pid,
                   hs_errno_text(-err));
            break;
        }
        if (tc->hook)
            tc->hook(HS_MU_TC_EVENT_LISTED, 0, tc->hook_arg);
        if (tc->num_threads == first_new)
            break; /* nothing new: every thread is stopped or gone */
        for (size_t i = first_new; i < tc->num_threads && !err; i++)
            err = seize(tc, &tc->threads[i]);
        if (err < 0)
            break;
        err = wait_stops(tc, first_new, deadline_ns);
        if (err < 0)
            break;
    }
    if (err == -ETIMEDOUT)
        mu_log("thread capture: timed out: %zu thread(s) of process %d had not stopped "
               "(%zu had); releasing them",
               tc->num_waiting, (int)tc->pid, tc->num_stopped);
    if (err < 0) {
        tc->last_error = -err;
        hs_mu_tc_release_all(tc, hs_mu_now_ns() + 100000000ull);
        return err;
    }
    if (tc->hook)
        tc->hook(HS_MU_TC_EVENT_ALL_STOPPED, 0, tc->hook_arg);
    return (int)tc->num_stopped;
}

size_t hs_mu_tc_release_all(struct hs_mu_thread_capture *tc, uint64_t grace_deadline_ns)
{
    size_t stuck = 0, detached = 0;
    for (size_t i = 0; i < tc->num_threads; i++) {
        struct hs_mu_tc_thread *t = &tc->threads[i];
        /* A thread whose stop was not collected: collect it first, so that a signal it
         * stopped for is handed back rather than lost at detach. */
        while (t->state == HS_MU_TC_WAITING) {
            int status = 0;
            long r = hs_mu_sys6(SYS_wait4, t->tid, (long)&status, __WALL | WNOHANG, 0, 0, 0);
            if (r == t->tid) {
                on_status(tc, t->tid, status);
                continue;
            }
            if (r == -ECHILD) {
                mark_gone(tc, t);
                break;
            }
            if (r < 0 && r != -EINTR)
                break;
            if (hs_mu_now_ns() >= grace_deadline_ns)
                break;
            hs_mu_sleep_ns(POLL_MIN_NS);
        }
        if (t->state == HS_MU_TC_STOPPED) {
            long r = pt(PTRACE_DETACH, t->tid, 0, t->pending_signal);
            /* ESRCH: killed while stopped; nothing to release. */
            (void)r;
            t->state = HS_MU_TC_RELEASED;
            detached++;
        } else if (t->state == HS_MU_TC_WAITING) {
            stuck++;
        }
    }
    if (detached || !tc->released_ns)
        tc->released_ns = hs_mu_now_ns();
    if (stuck)
        mu_log("thread capture: %zu thread(s) never stopped; they are released when the "
               "capturing task exits",
               stuck);
    return stuck;
}

void hs_mu_tc_free(struct hs_mu_thread_capture *tc)
{
    hs_arena_free(tc->arena, tc->threads, tc->cap_threads * sizeof(*tc->threads));
    hs_mu_tc_index_destroy(&tc->index);
    tc->threads = NULL;
    tc->num_threads = tc->cap_threads = 0;
}
