/* test_thread_capture.c: unit tests of src/memunreachable/thread_capture.c.
 *
 * The capture runs as in the collector: in a CLONE_VM task outside the thread group (the
 * "capturer", on its own mmap'd stack), while the main thread waits on a futex. Worker threads
 * park in a futex_wait issued from inline assembly with a per-thread magic value in r15 (a
 * callee-saved register the kernel leaves alone), so the test can check that the captured
 * registers are each thread's own. Hooks in the capture (called in the capturer) make threads
 * exit, receive signals or start new threads at chosen points. Checks run in the main thread,
 * after the capturer has exited.
 */
#define _GNU_SOURCE
#include "check.h"

#include "arena.h"
#include "format.h"
#include "log.h"
#include "thread_capture.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAGIC 0x5eed000000000000ull
#define MAX_WORKERS 1100

/* ---- parked workers ---- */

struct worker {
    pthread_t thread;
    int index;
    volatile pid_t tid;
    volatile uintptr_t stack_ref; /* address of a local of the worker */
    int exit_word;                /* futex: 1 = leave the park loop */
};

static struct worker g_workers[MAX_WORKERS];
static pid_t g_main_pid; /* getpid() in the capturer would be the capturer's own */
static int g_num_workers;
static int g_ready;

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    return hs_mu_sys6(nr, a, b, c, d, e, f);
}

static pid_t gettid_raw(void)
{
    return (pid_t)sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

/* futex_wait loop on *word (until non-zero) with r15 = magic, all in assembly so that r15
 * holds the magic value whenever the thread is stopped in the system call. */
static void park(int *word, uint64_t magic)
{
    __asm__ volatile(
        "mov %[magic], %%r15\n\t"
        "1:\n\t"
        "cmpl $0, (%[word])\n\t"
        "jne 2f\n\t"
        "mov %[nr], %%eax\n\t"
        "mov %[word], %%rdi\n\t"
        "mov %[op], %%esi\n\t"
        "xor %%edx, %%edx\n\t"
        "xor %%r10d, %%r10d\n\t"
        "syscall\n\t"
        "jmp 1b\n\t"
        "2:\n\t"
        :
        : [magic] "r"(magic), [word] "r"(word), [nr] "i"(SYS_futex), [op] "i"(FUTEX_WAIT_PRIVATE)
        : "rax", "rdi", "rsi", "rdx", "r10", "r15", "rcx", "r11", "memory", "cc");
}

static void futex_wake_all(int *word)
{
    sys6(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    volatile int local = 0;
    w->stack_ref = (uintptr_t)&local;
    w->tid = gettid_raw();
    __atomic_add_fetch(&g_ready, 1, __ATOMIC_SEQ_CST);
    park(&w->exit_word, MAGIC | (uint64_t)w->index);
    return NULL;
}

/* State letter of /proc/self/task/<tid>/stat ('?' when unreadable). Raw calls only: used in
 * the capturer too. */
static char thread_state(pid_t tid)
{
    char path[64], buf[512];
    hs_format(path, sizeof(path), "/proc/%d/task/%d/stat", (int)g_main_pid, (int)tid);
    long fd = sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return '?';
    long n = sys6(SYS_read, fd, (long)buf, sizeof(buf) - 1, 0, 0, 0);
    sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

static long tracer_pid(pid_t tid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "TracerPid:");
    return p ? strtol(p + 10, NULL, 10) : -1;
}

static void wait_state(pid_t tid, const char *states, uint64_t timeout_ns)
{
    uint64_t end = hs_mu_now_ns() + timeout_ns;
    while (!strchr(states, thread_state(tid)) && hs_mu_now_ns() < end)
        hs_mu_sleep_ns(100000);
}

static void start_workers(int n)
{
    static pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    g_ready = 0;
    for (int i = 0; i < n; i++) {
        struct worker *w = &g_workers[i];
        memset(w, 0, sizeof(*w));
        w->index = i;
        if (pthread_create(&w->thread, &attr, worker_main, w) != 0) {
            fprintf(stderr, "pthread_create %d failed\n", i);
            exit(1);
        }
    }
    g_num_workers = n;
    while (__atomic_load_n(&g_ready, __ATOMIC_SEQ_CST) < n)
        sched_yield();
    /* Each must be inside the futex wait (r15 set) before a capture. */
    for (int i = 0; i < n; i++)
        wait_state(g_workers[i].tid, "S", 2000000000ull);
}

/* Wakes every worker and joins it: proof that none was left stopped. */
static int stop_workers(void)
{
    int joined = 0;
    for (int i = 0; i < g_num_workers; i++) {
        __atomic_store_n(&g_workers[i].exit_word, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&g_workers[i].exit_word);
    }
    for (int i = 0; i < g_num_workers; i++) {
        if (g_workers[i].thread && pthread_join(g_workers[i].thread, NULL) == 0)
            joined++;
        g_workers[i].thread = 0;
    }
    g_num_workers = 0;
    return joined;
}

/* ---- the capturer ---- */

struct job {
    struct hs_arena arena;
    struct hs_mu_thread_capture tc;
    pid_t pid;
    uint64_t timeout_ns;
    hs_mu_tc_hook_fn hook;
    int result;
    size_t traced_while_captured; /* STOPPED threads in tracing stop ('t') */
    size_t stuck;
    int done;
};

static int capturer_main(void *arg)
{
    struct job *j = arg;
    hs_mu_tc_init(&j->tc, j->pid, &j->arena);
    j->tc.hook = j->hook;
    j->tc.hook_arg = j;
    j->result = hs_mu_tc_stop_all(&j->tc, hs_mu_now_ns() + j->timeout_ns);
    if (j->result >= 0) {
        for (size_t i = 0; i < j->tc.num_threads; i++)
            if (j->tc.threads[i].state == HS_MU_TC_STOPPED &&
                thread_state(j->tc.threads[i].tid) == 't')
                j->traced_while_captured++;
        j->stuck = hs_mu_tc_release_all(&j->tc, hs_mu_now_ns() + 100000000ull);
    }
    __atomic_store_n(&j->done, 1, __ATOMIC_SEQ_CST);
    futex_wake_all(&j->done);
    for (;;)
        sys6(SYS_exit, 0, 0, 0, 0, 0, 0);
    return 0;
}

/* Runs one capture in a CLONE_VM task; the job's arena tracks its mappings so that the caller
 * can free it all with hs_arena_destroy. */
static void run_job(struct job *j)
{
    j->pid = getpid();
    j->done = 0;
    size_t stack_bytes = 256 << 10;
    char *stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    int tid = clone(capturer_main, stack + stack_bytes,
                    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED, j);
    if (tid < 0) {
        perror("clone");
        exit(1);
    }
    prctl(PR_SET_PTRACER, tid, 0, 0, 0);
    uint64_t end = hs_mu_now_ns() + 20000000000ull;
    while (!__atomic_load_n(&j->done, __ATOMIC_SEQ_CST) && hs_mu_now_ns() < end) {
        struct timespec ts = {0, 50000000};
        sys6(SYS_futex, (long)&j->done, FUTEX_WAIT_PRIVATE, 0, (long)&ts, 0, 0);
    }
    if (!__atomic_load_n(&j->done, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "capturer hung; killing it\n");
        kill(tid, SIGKILL);
    }
    int st;
    while (waitpid(tid, &st, __WCLONE) < 0 && errno == EINTR)
        ;
    munmap(stack, stack_bytes);
}

static void job_init(struct job *j, uint64_t timeout_ns, hs_mu_tc_hook_fn hook)
{
    memset(j, 0, sizeof(*j));
    hs_arena_track_mappings(&j->arena);
    j->timeout_ns = timeout_ns;
    j->hook = hook;
}

static const struct hs_mu_tc_thread *captured(const struct job *j, pid_t tid)
{
    for (size_t i = 0; i < j->tc.num_threads; i++)
        if (j->tc.threads[i].tid == tid)
            return &j->tc.threads[i];
    return NULL;
}

/* Every worker captured with its magic r15 and an sp in its own stack; the main thread too. */
static void check_workers_captured(const struct job *j, const char *ctx)
{
    check_context(ctx);
    size_t magic_ok = 0, sp_ok = 0, released = 0;
    for (int i = 0; i < g_num_workers; i++) {
        const struct hs_mu_tc_thread *t = captured(j, g_workers[i].tid);
        if (!t)
            continue;
        released += t->state == HS_MU_TC_RELEASED;
        magic_ok += t->regs.r15 == (MAGIC | (uint64_t)i);
        uintptr_t ref = g_workers[i].stack_ref;
        /* Within a few KiB of a local of the worker (which may sit in the red zone below
         * rsp: worker_main makes no calls after taking its address). */
        sp_ok += (t->regs.rsp < ref ? ref - t->regs.rsp : t->regs.rsp - ref) < 16384;
    }
    CHECK_EQ(released, g_num_workers);
    CHECK_EQ(magic_ok, g_num_workers);
    CHECK_EQ(sp_ok, g_num_workers);
    const struct hs_mu_tc_thread *main_t = captured(j, getpid());
    CHECK(main_t && main_t->state == HS_MU_TC_RELEASED);
    volatile int here = 0;
    uintptr_t ref = (uintptr_t)&here;
    CHECK(main_t &&
          (main_t->regs.rsp < ref ? ref - main_t->regs.rsp : main_t->regs.rsp - ref) < (1u << 20));
}

static void check_no_thread_traced(const char *ctx)
{
    check_context(ctx);
    size_t traced = 0, stopped = 0;
    for (int i = 0; i < g_num_workers; i++) {
        traced += tracer_pid(g_workers[i].tid) != 0;
        stopped += thread_state(g_workers[i].tid) == 't';
    }
    traced += tracer_pid(gettid_raw()) != 0;
    CHECK_EQ(traced, 0);
    CHECK_EQ(stopped, 0);
}

/* ---- tests ---- */

static void test_counts(void)
{
    static const int counts[] = {0, 1, 2, 10, 1024};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        int n = counts[k];
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "capture with %d worker(s)", n);
        check_context(ctx);
        start_workers(n);
        struct job j;
        job_init(&j, 5000000000ull, NULL);
        run_job(&j);
        CHECK_EQ(j.result, n + 1);
        CHECK_EQ(j.tc.num_stopped, (size_t)n + 1);
        CHECK_EQ(j.traced_while_captured, (size_t)n + 1);
        CHECK_EQ(j.stuck, 0);
        CHECK(j.tc.rounds >= 2);
        CHECK(j.tc.first_stop_ns != 0 && j.tc.released_ns > j.tc.first_stop_ns);
        check_workers_captured(&j, ctx);
        check_no_thread_traced(ctx);
        printf("  %4d threads: pause %.3f ms (stop %.3f ms)\n", n + 1,
               (j.tc.released_ns - j.tc.first_stop_ns) / 1e6,
               (j.tc.all_stopped_ns - j.tc.first_stop_ns) / 1e6);
        hs_arena_destroy(&j.arena);
        check_context(ctx);
        CHECK_EQ(stop_workers(), n);
    }
}

/* A thread exits after the listing, before it is seized (ESRCH), and another one after it
 * was seized, before its stop (exit reported to waitpid). */
static struct worker *g_exit_before_seize, *g_exit_after_seize;

static void wait_gone(pid_t tid)
{
    uint64_t end = hs_mu_now_ns() + 2000000000ull;
    while (sys6(SYS_tgkill, g_main_pid, tid, 0, 0, 0, 0) == 0 && hs_mu_now_ns() < end)
        hs_mu_sleep_ns(100000);
}

static void exit_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    struct job *j = arg;
    if (ev == HS_MU_TC_EVENT_LISTED && j->tc.rounds == 1) {
        struct worker *w = g_exit_before_seize;
        __atomic_store_n(&w->exit_word, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&w->exit_word);
        wait_gone(w->tid);
    } else if (ev == HS_MU_TC_EVENT_SEIZED && tid == g_exit_after_seize->tid) {
        struct worker *w = g_exit_after_seize;
        __atomic_store_n(&w->exit_word, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&w->exit_word);
        wait_state(w->tid, "ZX?", 2000000000ull); /* a traced thread stays a zombie */
    }
}

static void test_thread_exits(void)
{
    check_context("threads exiting during the capture");
    start_workers(6);
    g_exit_before_seize = &g_workers[2];
    g_exit_after_seize = &g_workers[4];
    pid_t gone1 = g_exit_before_seize->tid, gone2 = g_exit_after_seize->tid;
    struct job j;
    job_init(&j, 5000000000ull, exit_hook);
    run_job(&j);
    CHECK_EQ(j.result, 5);
    CHECK_EQ(j.tc.num_gone, 2);
    const struct hs_mu_tc_thread *t1 = captured(&j, gone1), *t2 = captured(&j, gone2);
    CHECK(t1 && t1->state == HS_MU_TC_GONE);
    CHECK(t2 && t2->state == HS_MU_TC_GONE);
    size_t ok = 0;
    for (int i = 0; i < g_num_workers; i++) {
        const struct hs_mu_tc_thread *t = captured(&j, g_workers[i].tid);
        ok += t && t->state == HS_MU_TC_RELEASED && t->regs.r15 == (MAGIC | (uint64_t)i);
    }
    CHECK_EQ(ok, 4);
    hs_arena_destroy(&j.arena);
    CHECK_EQ(stop_workers(), 6);
}

/* Signals: one arrives between PTRACE_SEIZE and PTRACE_INTERRUPT and is reported as a
 * signal-delivery-stop (it must be handed back at detach, or it would be lost); another is
 * sent while every thread is stopped (stays pending). Each handler runs once, afterwards. */
static int g_usr1_runs, g_usr2_runs, g_runs_while_stopped = -1;
static struct worker *g_signal_target, *g_signal_target2;

static void on_signal(int sig)
{
    __atomic_add_fetch(sig == SIGUSR1 ? &g_usr1_runs : &g_usr2_runs, 1, __ATOMIC_SEQ_CST);
}

static void signal_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    (void)arg;
    if (ev == HS_MU_TC_EVENT_SEIZED && tid == g_signal_target->tid) {
        sys6(SYS_tgkill, g_main_pid, tid, SIGUSR1, 0, 0, 0);
        wait_state(tid, "t", 2000000000ull); /* in its signal-delivery-stop */
    } else if (ev == HS_MU_TC_EVENT_ALL_STOPPED) {
        /* Every thread is stopped: no handler can have run yet. */
        g_runs_while_stopped = __atomic_load_n(&g_usr1_runs, __ATOMIC_SEQ_CST) +
                               __atomic_load_n(&g_usr2_runs, __ATOMIC_SEQ_CST);
        sys6(SYS_tgkill, g_main_pid, g_signal_target2->tid, SIGUSR2, 0, 0, 0);
    }
}

static void wait_counter(int *counter, int want, uint64_t timeout_ns)
{
    uint64_t end = hs_mu_now_ns() + timeout_ns;
    while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < want && hs_mu_now_ns() < end)
        hs_mu_sleep_ns(100000);
}

static void test_signals(void)
{
    check_context("signals during the capture");
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    start_workers(4);
    g_signal_target = &g_workers[1];
    g_signal_target2 = &g_workers[3];
    struct job j;
    job_init(&j, 5000000000ull, signal_hook);
    run_job(&j);
    CHECK_EQ(j.result, 5);
    CHECK_EQ(j.tc.num_signals, 1);
    const struct hs_mu_tc_thread *t = captured(&j, g_signal_target->tid);
    CHECK(t && t->pending_signal == SIGUSR1);
    CHECK(t && t->regs.r15 == (MAGIC | 1u));
    wait_counter(&g_usr1_runs, 1, 2000000000ull);
    wait_counter(&g_usr2_runs, 1, 2000000000ull);
    hs_mu_sleep_ns(20000000);
    CHECK_EQ(g_usr1_runs, 1);
    CHECK_EQ(g_usr2_runs, 1);
    CHECK_EQ(g_runs_while_stopped, 0);
    hs_arena_destroy(&j.arena);
    CHECK_EQ(stop_workers(), 4);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
}

/* A thread created during the capture (after the first listing) is caught by a later one. */
static int g_spawn_go;
static volatile pid_t g_spawned_tid;
static struct worker g_spawned;

static void *spawner_main(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_spawn_go, __ATOMIC_SEQ_CST))
        sys6(SYS_futex, (long)&g_spawn_go, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
    g_spawned.index = 77;
    pthread_create(&g_spawned.thread, NULL, worker_main, &g_spawned);
    park(&g_spawned.exit_word, MAGIC | 78); /* shares the exit word with the new thread */
    return NULL;
}

static void spawn_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    struct job *j = arg;
    (void)tid;
    if (ev == HS_MU_TC_EVENT_LISTED && j->tc.rounds == 1) {
        __atomic_store_n(&g_spawn_go, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&g_spawn_go);
        uint64_t end = hs_mu_now_ns() + 2000000000ull;
        while (!g_spawned.tid && hs_mu_now_ns() < end)
            hs_mu_sleep_ns(50000);
        g_spawned_tid = g_spawned.tid;
    }
}

static void test_new_threads(void)
{
    check_context("threads created during the capture");
    memset(&g_spawned, 0, sizeof(g_spawned));
    g_ready = 0;
    pthread_t spawner;
    pthread_create(&spawner, NULL, spawner_main, NULL);
    pid_t spawner_tid = 0;
    /* Wait until the spawner is blocked on g_spawn_go. */
    hs_mu_sleep_ns(20000000);
    struct job j;
    job_init(&j, 5000000000ull, spawn_hook);
    run_job(&j);
    CHECK(g_spawned_tid != 0);
    CHECK_EQ(j.result, 3); /* main, spawner, the new thread */
    CHECK(j.tc.rounds >= 3);
    const struct hs_mu_tc_thread *t = captured(&j, g_spawned_tid);
    CHECK(t && t->state == HS_MU_TC_RELEASED);
    for (size_t i = 0; i < j.tc.num_threads; i++)
        if (j.tc.threads[i].tid != getpid() && j.tc.threads[i].tid != g_spawned_tid)
            spawner_tid = j.tc.threads[i].tid;
    CHECK(spawner_tid != 0);
    hs_arena_destroy(&j.arena);
    __atomic_store_n(&g_spawned.exit_word, 1, __ATOMIC_SEQ_CST);
    futex_wake_all(&g_spawned.exit_word);
    CHECK_EQ(pthread_join(g_spawned.thread, NULL), 0);
    CHECK_EQ(pthread_join(spawner, NULL), 0);
}

/* A thread traced by someone else: EPERM, with a log line naming the tracer. */
static char g_log_text[4096];

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    size_t used = strlen(g_log_text);
    if (used + len < sizeof(g_log_text)) {
        memcpy(g_log_text + used, line, len);
        g_log_text[used + len] = '\0';
    }
}

/* The deadline passes with threads stopped: the capture fails and releases all of them. */
static void stall_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    struct job *j = arg;
    if (ev == HS_MU_TC_EVENT_SEIZED && tid == g_workers[2].tid)
        hs_mu_sleep_ns(j->timeout_ns + 50000000ull);
}

static void test_timeout_releases(void)
{
    check_context("a capture that times out releases every thread");
    start_workers(5);
    struct job j;
    job_init(&j, 100000000ull, stall_hook);
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    run_job(&j);
    hs_log_set_sink(NULL, NULL);
    CHECK_EQ(j.result, -ETIMEDOUT);
    CHECK(strstr(g_log_text, "timed out") != NULL);
    CHECK_EQ(j.tc.num_waiting, 0);
    size_t released = 0;
    for (size_t i = 0; i < j.tc.num_threads; i++)
        released += j.tc.threads[i].state == HS_MU_TC_RELEASED;
    CHECK_EQ(released, j.tc.num_threads);
    check_no_thread_traced("a capture that times out releases every thread");
    hs_arena_destroy(&j.arena);
    CHECK_EQ(stop_workers(), 5);
}

static void test_already_traced(void)
{
    check_context("ptrace refused");
    start_workers(2);
    pid_t victim = g_workers[1].tid;
    int to_child[2], from_child[2];
    if (pipe(to_child) || pipe(from_child))
        exit(1);
    pid_t child = fork();
    if (child == 0) {
        char c = ptrace(PTRACE_SEIZE, victim, 0, 0) == 0 ? 'y' : 'n';
        (void)!write(from_child[1], &c, 1);
        (void)!read(to_child[0], &c, 1);
        ptrace(PTRACE_DETACH, victim, 0, 0);
        _exit(0);
    }
    char c = 0;
    (void)!read(from_child[0], &c, 1);
    CHECK_EQ(c, 'y');
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    struct job j;
    job_init(&j, 2000000000ull, NULL);
    run_job(&j);
    hs_log_set_sink(NULL, NULL);
    CHECK_EQ(j.result, -EPERM);
    char expect[64];
    snprintf(expect, sizeof(expect), "already traced by process %d", (int)child);
    CHECK(strstr(g_log_text, expect) != NULL);
    (void)!write(to_child[1], "x", 1);
    waitpid(child, NULL, 0);
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
    check_no_thread_traced("ptrace refused");
    hs_arena_destroy(&j.arena);
    CHECK_EQ(stop_workers(), 2);
}

/* Threads starting and exiting all the time: every capture still succeeds. */
static int g_churn_stop;

static void *short_lived(void *arg)
{
    return arg;
}

static void *churner(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_churn_stop, __ATOMIC_SEQ_CST)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static void test_churn(void)
{
    check_context("threads starting and exiting during captures");
    pthread_t churners[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&churners[i], NULL, churner, NULL);
    int ok = 0;
    for (int k = 0; k < 30; k++) {
        struct job j;
        job_init(&j, 5000000000ull, NULL);
        run_job(&j);
        ok += j.result >= 4 && j.stuck == 0;
        hs_arena_destroy(&j.arena);
    }
    CHECK_EQ(ok, 30);
    __atomic_store_n(&g_churn_stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_join(churners[i], NULL), 0);
}

int main(void)
{
    g_main_pid = getpid();
    test_counts();
    test_thread_exits();
    test_signals();
    test_new_threads();
    test_timeout_releases();
    test_already_traced();
    test_churn();
    return check_report();
}
