/* test_collector.c: unit tests of src/memunreachable/collector.c (the capture sequence).
 *
 * A fake heap source (a fixed array of blocks behind a spinlock that disable/enable hold and
 * release, counting calls and recording who made them) stands in for the malloc debug shim,
 * and a stub hs_mu_sweep, linked instead of sweep.c, reports over the result pipe what the
 * sweeper received: the threads with their sp and r15, the excluded ranges, its signal mask
 * and descriptors, and whether the heap it iterates is consistent. Worker threads park in a
 * futex_wait issued from inline assembly with a per-thread magic value in r15.
 *
 * Test hooks (hs_mu_collect_test_hooks) run in the collector: raw system calls only.
 */
#define _GNU_SOURCE
#include "check.h"

#include "capture.h"
#include "collector.h"
#include "format.h"
#include "log.h"
#include "spinlock.h"
#include "thread_capture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAGIC 0x5eed000000000000ull
#define MAX_WORKERS 1100
#define NUM_BLOCKS 64
#define REPORT_MAGIC 0x7377656570ull

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    return hs_mu_sys6(nr, a, b, c, d, e, f);
}

static pid_t gettid_raw(void)
{
    return (pid_t)sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
}

static void futex_wake_all(int *word)
{
    sys6(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, INT32_MAX, 0, 0, 0);
}

/* ---- the fake heap source ---- */

struct block {
    uintptr_t ptr;
    size_t size;
    size_t shadow; /* == size whenever the table lock is free */
};

static struct block g_blocks[NUM_BLOCKS];
static hs_spinlock g_table_lock;
static int g_disable_calls, g_enable_calls;
static pid_t g_enable_tid;

static void fake_disable(void)
{
    hs_spin_lock(&g_table_lock);
    __atomic_add_fetch(&g_disable_calls, 1, __ATOMIC_SEQ_CST);
}

static void fake_enable(void)
{
    __atomic_add_fetch(&g_enable_calls, 1, __ATOMIC_SEQ_CST);
    g_enable_tid = gettid_raw();
    hs_spin_unlock(&g_table_lock);
}

static int fake_iterate(uintptr_t base, size_t size,
                        void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    for (int i = 0; i < NUM_BLOCKS; i++)
        if (g_blocks[i].ptr >= base && g_blocks[i].ptr - base < size)
            callback(g_blocks[i].ptr, g_blocks[i].size, arg);
    return 0;
}

/* The allocator's own memory (two ranges), listed only while the allocator is disabled. */
static char g_own_memory[2][4096];
static int g_own_listed_enabled; /* listings while the table lock was free: must stay 0 */

static size_t fake_own_memory(struct hs_arena_mapping *out, size_t cap)
{
    if (hs_spin_trylock(&g_table_lock)) {
        hs_spin_unlock(&g_table_lock);
        __atomic_add_fetch(&g_own_listed_enabled, 1, __ATOMIC_SEQ_CST);
    }
    for (size_t i = 0; i < 2 && i < cap; i++)
        out[i] = (struct hs_arena_mapping){(uintptr_t)g_own_memory[i],
                                           (uintptr_t)g_own_memory[i] + sizeof(g_own_memory[i])};
    return 2;
}

static const struct hs_mu_heap_source g_heap = {.iterate = fake_iterate,
                                                .disable = fake_disable,
                                                .enable = fake_enable,
                                                .own_memory = fake_own_memory};

/* Mutators change the table under its lock, as allocating threads would. */
static int g_mutators_stop;

static void *mutator_main(void *arg)
{
    size_t v = (size_t)(uintptr_t)arg;
    while (!__atomic_load_n(&g_mutators_stop, __ATOMIC_SEQ_CST)) {
        hs_spin_lock(&g_table_lock);
        for (int i = 0; i < NUM_BLOCKS; i++) {
            g_blocks[i].size = ++v;
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            g_blocks[i].shadow = v;
        }
        hs_spin_unlock(&g_table_lock);
        sched_yield();
    }
    return NULL;
}

/* ---- the stub sweeper ---- */

struct sweep_report {
    uint64_t magic;
    uint64_t num_threads, maps_len, num_excluded, limit, pid;
    uint64_t sp_excluded;      /* the sweeper's own stack (a copy of the collector's) */
    uint64_t capture_excluded; /* the capture, its arrays and the maps text */
    uint64_t maps_has_stack;
    uint64_t blocks, bad_blocks;
    uint64_t arena_ok;
    uint64_t segv_unblocked, int_blocked;
    uint64_t probe_fd_closed, result_fd_open;
    uint64_t regs_words;
    uint64_t workers_stopped; /* workers still stopped (traced) when the sweeper started */
    uint64_t own_excluded;    /* both ranges of the heap source's own memory */
};

struct thread_rec {
    int64_t tid;
    uint64_t sp, r15;
};

static int g_probe_fd = -1;
static int g_sweep_fail;      /* the stub returns -1 */
static int g_sweep_sleep_ms;  /* the stub sleeps first */
static int g_sweep_linger_ms; /* the stub stays after writing its report (< 0: forever) */

static int in_excluded(const struct hs_mu_capture *cap, uintptr_t addr)
{
    for (size_t i = 0; i < cap->num_excluded; i++)
        if (addr >= cap->excluded[i].begin && addr < cap->excluded[i].end)
            return 1;
    return 0;
}

struct iterate_acc {
    uint64_t blocks, bad;
};

static void count_block(uintptr_t ptr, size_t size, void *arg)
{
    struct iterate_acc *acc = arg;
    acc->blocks++;
    const struct block *b = (const struct block *)ptr;
    if (b->size != size || b->shadow != size)
        acc->bad++;
}

static void write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        long w = sys6(SYS_write, fd, (long)p, (long)len, 0, 0, 0);
        if (w == -EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        len -= (size_t)w;
    }
}

static char thread_state_raw(pid_t tid);
static struct worker_tids {
    pid_t tid[8];
    int n;
} g_watch; /* workers whose state the stub sweeper records first */

int hs_mu_sweep(const struct hs_mu_capture *capture, const struct hs_mu_heap_source *heap,
                size_t limit, int fd, struct hs_arena *arena)
{
    uint64_t stopped = 0;
    for (int i = 0; i < g_watch.n; i++)
        stopped += thread_state_raw(g_watch.tid[i]) == 't';
    if (g_sweep_sleep_ms)
        hs_mu_sleep_ns((uint64_t)g_sweep_sleep_ms * 1000000ull);
    struct sweep_report rep;
    memset(&rep, 0, sizeof(rep));
    rep.magic = REPORT_MAGIC;
    rep.num_threads = capture->num_threads;
    rep.maps_len = capture->maps_len;
    rep.num_excluded = capture->num_excluded;
    rep.limit = limit;
    rep.pid = (uint64_t)capture->pid;
    volatile int local = 0;
    rep.sp_excluded = in_excluded(capture, (uintptr_t)&local);
    rep.capture_excluded = in_excluded(capture, (uintptr_t)capture) &&
                           in_excluded(capture, (uintptr_t)capture->threads) &&
                           in_excluded(capture, (uintptr_t)capture->maps_text) &&
                           in_excluded(capture, (uintptr_t)capture->excluded);
    rep.own_excluded = in_excluded(capture, (uintptr_t)g_own_memory[0] + 100) &&
                       in_excluded(capture, (uintptr_t)g_own_memory[1] + 4095);
    rep.maps_has_stack = capture->maps_text && strstr(capture->maps_text, "[stack]") != NULL;
    struct iterate_acc acc = {0, 0};
    heap->iterate(0, UINTPTR_MAX, count_block, &acc);
    rep.blocks = acc.blocks;
    rep.bad_blocks = acc.bad;
    void *p = hs_arena_alloc(arena, 1000);
    rep.arena_ok = p != NULL && !in_excluded(capture, (uintptr_t)p);
    uint64_t mask = 0;
    sys6(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&mask, 8, 0, 0);
    rep.segv_unblocked = !(mask & (1ull << (SIGSEGV - 1))) && !(mask & (1ull << (SIGBUS - 1)));
    rep.int_blocked = (mask & (1ull << (SIGINT - 1))) && (mask & (1ull << (SIGCHLD - 1)));
    rep.probe_fd_closed = sys6(SYS_fcntl, g_probe_fd, F_GETFD, 0, 0, 0, 0) == -EBADF;
    rep.result_fd_open = sys6(SYS_fcntl, fd, F_GETFD, 0, 0, 0, 0) >= 0;
    rep.regs_words = capture->num_threads ? capture->threads[0].num_regs : 0;
    rep.workers_stopped = stopped;
    write_all(fd, &rep, sizeof(rep));
    for (size_t i = 0; i < capture->num_threads; i++) {
        const struct hs_mu_thread *t = &capture->threads[i];
        struct thread_rec r = {t->tid, t->sp, t->regs[0]}; /* r15 is the first word */
        write_all(fd, &r, sizeof(r));
    }
    if (g_sweep_linger_ms > 0)
        hs_mu_sleep_ns((uint64_t)g_sweep_linger_ms * 1000000ull);
    while (g_sweep_linger_ms < 0) /* every signal but SIGSEGV and SIGBUS is blocked */
        sys6(SYS_pause, 0, 0, 0, 0, 0, 0);
    return g_sweep_fail ? -1 : 0;
}

/* ---- parked workers ---- */

struct worker {
    pthread_t thread;
    int index;
    volatile pid_t tid;
    volatile uintptr_t stack_ref;
    int exit_word;
};

static struct worker g_workers[MAX_WORKERS];
static int g_num_workers;
static int g_ready;

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

/* The state letter of a /proc stat file ('?' when it cannot be read: gone). */
static char stat_state(const char *path)
{
    char buf[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

static char thread_state(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    return stat_state(path);
}

/* For the hooks (in the collector, whose /proc/self is not the program): raw calls only. */
static pid_t g_main_pid;

static char thread_state_raw(pid_t tid)
{
    char path[96], buf[512];
    hs_format(path, sizeof(path), "/proc/%d/task/%d/stat", (int)g_main_pid, (int)tid);
    long fd = sys6(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return '?';
    long r = sys6(SYS_read, fd, (long)buf, sizeof(buf) - 1, 0, 0, 0);
    sys6(SYS_close, fd, 0, 0, 0, 0, 0);
    if (r <= 0)
        return '?';
    buf[r] = '\0';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
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
    for (int i = 0; i < n; i++)
        wait_state(g_workers[i].tid, "S", 2000000000ull);
}

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

/* ---- running a collection ---- */

static struct thread_rec g_recs[MAX_WORKERS + 16];

struct run {
    int rc, finish_rc;
    struct hs_mu_collect_stats stats;
    struct sweep_report rep;
    size_t num_recs;
    int got_report;
    uint64_t elapsed_ns;
};

static void read_report(int fd, struct run *r)
{
    static char buf[sizeof(struct sweep_report) + sizeof(g_recs)];
    size_t len = 0;
    uint64_t end = hs_mu_now_ns() + 10000000000ull;
    while (len < sizeof(buf) && hs_mu_now_ns() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (len < sizeof(struct sweep_report))
        return;
    memcpy(&r->rep, buf, sizeof(r->rep));
    r->got_report = r->rep.magic == REPORT_MAGIC;
    r->num_recs = (len - sizeof(r->rep)) / sizeof(struct thread_rec);
    memcpy(g_recs, buf + sizeof(r->rep), r->num_recs * sizeof(struct thread_rec));
}

static void run_collect(struct run *r, int timeout_ms)
{
    memset(r, 0, sizeof(*r));
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        perror("pipe2");
        exit(1);
    }
    uint64_t start = hs_mu_now_ns();
    r->rc = hs_mu_collect(&g_heap, 7, fds[1], &r->stats, timeout_ms);
    r->elapsed_ns = hs_mu_now_ns() - start;
    close(fds[1]);
    if (r->rc == 0)
        read_report(fds[0], r);
    r->finish_rc = hs_mu_collect_finish(&r->stats);
    close(fds[0]);
}

static const struct thread_rec *rec_of(const struct run *r, pid_t tid)
{
    for (size_t i = 0; i < r->num_recs; i++)
        if (g_recs[i].tid == tid)
            return &g_recs[i];
    return NULL;
}

static int no_children(void)
{
    int st;
    return waitpid(-1, &st, __WALL | WNOHANG) < 0 && errno == ECHILD;
}

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    size_t n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static size_t count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    size_t n = 0;
    int c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

static size_t traced_threads(void)
{
    size_t n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[2048];
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[len > 0 ? len : 0] = '\0';
        char *p = strstr(buf, "TracerPid:");
        n += p && strtol(p + 10, NULL, 10) != 0;
        n += thread_state((pid_t)atoi(e->d_name)) == 't';
    }
    if (d)
        closedir(d);
    return n;
}

/* The checks every successful collection must pass. */
static void check_success(const struct run *r, int workers, const char *ctx)
{
    check_context(ctx);
    CHECK_EQ(r->rc, 0);
    CHECK(r->got_report);
    CHECK_EQ(r->finish_rc, 0);
    CHECK(r->stats.collector == NULL);
    CHECK_EQ(r->stats.num_threads, (size_t)workers + 1);
    CHECK_EQ(r->rep.num_threads, (size_t)workers + 1);
    CHECK_EQ(r->num_recs, (size_t)workers + 1);
    CHECK(r->stats.pause_ns > 0);
    CHECK(r->stats.capture_ns <= r->stats.pause_ns);
    CHECK(r->stats.rounds >= 2);
    CHECK_EQ(r->rep.pid, (uint64_t)getpid());
    CHECK_EQ(r->rep.limit, 7);
    CHECK(r->rep.maps_len > 0 && r->rep.maps_len == r->stats.maps_bytes);
    CHECK(r->rep.maps_has_stack);
    CHECK(r->rep.num_excluded >= 2 && r->rep.num_excluded == r->stats.num_excluded);
    CHECK(r->rep.sp_excluded);
    CHECK(r->rep.capture_excluded);
    CHECK(r->rep.own_excluded);
    CHECK_EQ(g_own_listed_enabled, 0);
    CHECK_EQ(r->rep.blocks, NUM_BLOCKS);
    CHECK_EQ(r->rep.bad_blocks, 0);
    CHECK(r->rep.arena_ok);
    CHECK(r->rep.segv_unblocked);
    CHECK(r->rep.int_blocked);
    CHECK(r->rep.probe_fd_closed);
    CHECK(r->rep.result_fd_open);
    CHECK_EQ(r->rep.regs_words, HS_MU_MAX_REGS);
    size_t magic_ok = 0, sp_ok = 0;
    for (int i = 0; i < g_num_workers; i++) {
        const struct thread_rec *t = rec_of(r, g_workers[i].tid);
        if (!t)
            continue;
        magic_ok += t->r15 == (MAGIC | (uint64_t)i);
        uintptr_t ref = g_workers[i].stack_ref; /* may be in the red zone below sp */
        sp_ok += (t->sp < ref ? ref - t->sp : t->sp - ref) < 16384;
    }
    CHECK_EQ(magic_ok, (size_t)workers);
    CHECK_EQ(sp_ok, (size_t)workers);
    CHECK(rec_of(r, getpid()) != NULL);
    CHECK_EQ(traced_threads(), 0);
    CHECK(no_children());
}

/* ---- tests ---- */

static void setup_blocks(void)
{
    for (int i = 0; i < NUM_BLOCKS; i++)
        g_blocks[i] = (struct block){(uintptr_t)&g_blocks[i], 100, 100};
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_counts(void)
{
    static const int totals[] = {1, 2, 10, 100, 1024};
    for (size_t k = 0; k < sizeof(totals) / sizeof(totals[0]); k++) {
        int n = totals[k] - 1;
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "collect with %d thread(s)", totals[k]);
        start_workers(n);
        uint64_t pauses[5];
        int runs = 5;
        for (int i = 0; i < runs; i++) {
            int disables = g_disable_calls, enables = g_enable_calls;
            struct run r;
            run_collect(&r, 5000);
            check_success(&r, n, ctx);
            CHECK_EQ(g_disable_calls, disables + 1);
            CHECK_EQ(g_enable_calls, enables + 1);
            CHECK(g_enable_tid != gettid_raw()); /* the collector enabled */
            pauses[i] = r.stats.pause_ns;
        }
        qsort(pauses, (size_t)runs, sizeof(pauses[0]), cmp_u64);
        printf("  %4d threads: pause min %.3f ms, median %.3f ms, max %.3f ms\n", totals[k],
               pauses[0] / 1e6, pauses[runs / 2] / 1e6, pauses[runs - 1] / 1e6);
        check_context(ctx);
        CHECK_EQ(stop_workers(), n);
    }
}

/* A thread exits after the first listing, before it is seized. */
static struct worker *g_exiting;

static void exit_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    (void)tid, (void)arg;
    static int done;
    if (ev == HS_MU_TC_EVENT_LISTED && !done) {
        done = 1;
        __atomic_store_n(&g_exiting->exit_word, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&g_exiting->exit_word);
        uint64_t end = hs_mu_now_ns() + 2000000000ull;
        while (sys6(SYS_tgkill, g_main_pid, g_exiting->tid, 0, 0, 0, 0) == 0 &&
               hs_mu_now_ns() < end)
            hs_mu_sleep_ns(100000);
    }
}

static void test_thread_exits(void)
{
    check_context("a thread exits during the capture");
    start_workers(5);
    g_exiting = &g_workers[3];
    pid_t gone = g_exiting->tid;
    hs_mu_collect_test_hooks.capture = exit_hook;
    struct run r;
    run_collect(&r, 5000);
    hs_mu_collect_test_hooks.capture = NULL;
    CHECK_EQ(r.rc, 0);
    CHECK_EQ(r.finish_rc, 0);
    CHECK(r.stats.threads_exited >= 1);
    CHECK_EQ(r.stats.num_threads, 5);
    CHECK(rec_of(&r, gone) == NULL);
    size_t magic_ok = 0;
    for (int i = 0; i < g_num_workers; i++) {
        const struct thread_rec *t = rec_of(&r, g_workers[i].tid);
        magic_ok += t && t->r15 == (MAGIC | (uint64_t)i);
    }
    CHECK_EQ(magic_ok, 4);
    CHECK_EQ(traced_threads(), 0);
    CHECK(no_children());
    CHECK_EQ(stop_workers(), 5);
}

/* A signal arrives between PTRACE_SEIZE and PTRACE_INTERRUPT (a signal-delivery-stop): it
 * is held while the threads are stopped and handled once afterwards. */
static int g_usr1_runs, g_usr1_runs_at_capture = -1;
static struct worker *g_signal_target;

static void on_usr1(int sig)
{
    (void)sig;
    __atomic_add_fetch(&g_usr1_runs, 1, __ATOMIC_SEQ_CST);
}

static void signal_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    (void)arg;
    if (ev == HS_MU_TC_EVENT_SEIZED && tid == g_signal_target->tid) {
        sys6(SYS_tgkill, g_main_pid, tid, SIGUSR1, 0, 0, 0);
        uint64_t end = hs_mu_now_ns() + 2000000000ull;
        while (thread_state_raw(tid) != 't' && hs_mu_now_ns() < end)
            hs_mu_sleep_ns(100000);
    }
}

static void signal_stage(enum hs_mu_collect_stage stage, void *arg)
{
    (void)arg;
    if (stage == HS_MU_COLLECT_STAGE_CAPTURED)
        g_usr1_runs_at_capture = __atomic_load_n(&g_usr1_runs, __ATOMIC_SEQ_CST);
}

static void test_signal(void)
{
    check_context("a signal during the capture");
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    start_workers(3);
    g_signal_target = &g_workers[1];
    hs_mu_collect_test_hooks.capture = signal_hook;
    hs_mu_collect_test_hooks.stage = signal_stage;
    struct run r;
    run_collect(&r, 5000);
    hs_mu_collect_test_hooks.capture = NULL;
    hs_mu_collect_test_hooks.stage = NULL;
    check_success(&r, 3, "a signal during the capture");
    CHECK_EQ(r.stats.signals_redelivered, 1);
    CHECK_EQ(g_usr1_runs_at_capture, 0);
    uint64_t end = hs_mu_now_ns() + 2000000000ull;
    while (__atomic_load_n(&g_usr1_runs, __ATOMIC_SEQ_CST) < 1 && hs_mu_now_ns() < end)
        hs_mu_sleep_ns(100000);
    hs_mu_sleep_ns(20000000);
    CHECK_EQ(g_usr1_runs, 1);
    CHECK_EQ(stop_workers(), 3);
    signal(SIGUSR1, SIG_DFL);
}

/* A thread created during the capture (after the first listing) is captured too. */
static int g_spawn_go;
static struct worker g_spawned;

static void *spawner_main(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_spawn_go, __ATOMIC_SEQ_CST))
        sys6(SYS_futex, (long)&g_spawn_go, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
    g_spawned.index = 500;
    pthread_create(&g_spawned.thread, NULL, worker_main, &g_spawned);
    park(&g_spawned.exit_word, 0);
    return NULL;
}

static void spawn_hook(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    (void)tid, (void)arg;
    static int done;
    if (ev == HS_MU_TC_EVENT_LISTED && !done) {
        done = 1;
        __atomic_store_n(&g_spawn_go, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&g_spawn_go);
        uint64_t end = hs_mu_now_ns() + 2000000000ull;
        while (!g_spawned.tid && hs_mu_now_ns() < end)
            hs_mu_sleep_ns(50000);
    }
}

static void test_new_thread(void)
{
    check_context("a thread created during the capture");
    pthread_t spawner;
    pthread_create(&spawner, NULL, spawner_main, NULL);
    hs_mu_sleep_ns(20000000);
    hs_mu_collect_test_hooks.capture = spawn_hook;
    struct run r;
    run_collect(&r, 5000);
    hs_mu_collect_test_hooks.capture = NULL;
    CHECK_EQ(r.rc, 0);
    CHECK(g_spawned.tid != 0);
    CHECK_EQ(r.stats.num_threads, 3);
    CHECK(r.stats.rounds >= 3);
    CHECK(rec_of(&r, g_spawned.tid) != NULL);
    __atomic_store_n(&g_spawned.exit_word, 1, __ATOMIC_SEQ_CST);
    futex_wake_all(&g_spawned.exit_word);
    CHECK_EQ(pthread_join(g_spawned.thread, NULL), 0);
    CHECK_EQ(pthread_join(spawner, NULL), 0);
    CHECK_EQ(traced_threads(), 0);
}

/* 100 collections: no descriptor, thread, child or mapping is left behind, and the heap the
 * sweeper sees is consistent although mutators keep changing it. */
static void test_repeat(void)
{
    check_context("100 collections");
    start_workers(4);
    pthread_t mutators[2];
    g_mutators_stop = 0;
    for (int i = 0; i < 2; i++)
        pthread_create(&mutators[i], NULL, mutator_main, (void *)(uintptr_t)(i * 1000000));
    struct run r;
    run_collect(&r, 5000); /* warm-up */
    size_t fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
    size_t maps = count_maps();
    int disables = g_disable_calls, enables = g_enable_calls;
    int ok = 0, consistent = 0;
    uint64_t max_pause = 0;
    for (int i = 0; i < 100; i++) {
        run_collect(&r, 5000);
        ok += r.rc == 0 && r.finish_rc == 0 && r.got_report && r.rep.num_threads == 7 &&
              r.stats.collector == NULL;
        consistent += r.rep.blocks == NUM_BLOCKS && r.rep.bad_blocks == 0;
        if (r.stats.pause_ns > max_pause)
            max_pause = r.stats.pause_ns;
    }
    CHECK_EQ(ok, 100);
    CHECK_EQ(consistent, 100);
    CHECK_EQ(g_disable_calls - disables, 100);
    CHECK_EQ(g_enable_calls - enables, 100);
    CHECK_EQ(count_dir("/proc/self/fd"), fds);
    CHECK_EQ(count_dir("/proc/self/task"), tasks);
    CHECK_EQ(count_maps(), maps);
    CHECK(no_children());
    CHECK_EQ(traced_threads(), 0);
    printf("  100 collections of 7 threads (2 mutating): max pause %.3f ms\n", max_pause / 1e6);
    __atomic_store_n(&g_mutators_stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 2; i++)
        pthread_join(mutators[i], NULL);
    CHECK_EQ(stop_workers(), 4);
}

/* Timeouts: the collector stalls at a chosen point. */
static enum hs_mu_collect_stage g_stall_stage;
static int g_stall_capture_ms;
static char g_log_text[8192];

static void stall_stage(enum hs_mu_collect_stage stage, void *arg)
{
    (void)arg;
    if (stage == g_stall_stage)
        hs_mu_sleep_ns(3000000000ull); /* until killed */
}

static void stall_capture(enum hs_mu_tc_event ev, pid_t tid, void *arg)
{
    (void)arg;
    if (ev == HS_MU_TC_EVENT_SEIZED && tid == g_workers[1].tid)
        hs_mu_sleep_ns((uint64_t)g_stall_capture_ms * 1000000ull);
}

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    size_t used = strlen(g_log_text);
    if (used + len < sizeof(g_log_text)) {
        memcpy(g_log_text + used, line, len);
        g_log_text[used + len] = '\0';
    }
}

static void check_timeout(const struct run *r, int enables_before, int by_main, size_t maps,
                          const char *ctx)
{
    check_context(ctx);
    CHECK_EQ(r->rc, -ETIMEDOUT);
    CHECK(r->stats.collector == NULL);
    CHECK_EQ(g_enable_calls, enables_before + 1);
    if (by_main)
        CHECK_EQ(g_enable_tid, gettid_raw());
    else
        CHECK(g_enable_tid != gettid_raw());
    CHECK(no_children());
    CHECK_EQ(traced_threads(), 0);
    CHECK_EQ(count_maps(), maps);
    CHECK(r->elapsed_ns < 2000000000ull);
    CHECK(strstr(g_log_text, "timed out") != NULL);
    /* The table lock is free again: a "malloc" goes through. */
    CHECK(hs_spin_trylock(&g_table_lock));
    hs_spin_unlock(&g_table_lock);
    CHECK_EQ(stop_workers(), 3);
}

static void test_timeouts(void)
{
    struct run r;
    size_t maps;
    int enables;

    /* Stalls before stopping anything: T0 gives up, enables, kills the collector. */
    start_workers(3);
    maps = count_maps();
    enables = g_enable_calls;
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    g_stall_stage = HS_MU_COLLECT_STAGE_STARTED;
    hs_mu_collect_test_hooks.stage = stall_stage;
    run_collect(&r, 200);
    hs_mu_collect_test_hooks.stage = NULL;
    hs_log_set_sink(NULL, NULL);
    check_timeout(&r, enables, 1, maps, "collector stalls before the capture");

    /* Stalls with threads stopped: the collector's capture deadline releases them. */
    start_workers(3);
    maps = count_maps();
    enables = g_enable_calls;
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    g_stall_capture_ms = 300;
    hs_mu_collect_test_hooks.capture = stall_capture;
    run_collect(&r, 400);
    hs_mu_collect_test_hooks.capture = NULL;
    hs_log_set_sink(NULL, NULL);
    check_timeout(&r, enables, 0, maps, "capture deadline"); /* T0 was stopped: the collector
                                                               gave up and enabled */

    /* Stalls after releasing the threads, before waking T0: T0 gives up and kills it (and
     * the sweeper). */
    start_workers(3);
    maps = count_maps();
    enables = g_enable_calls;
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    g_stall_stage = HS_MU_COLLECT_STAGE_RELEASED;
    hs_mu_collect_test_hooks.stage = stall_stage;
    run_collect(&r, 200);
    hs_mu_collect_test_hooks.stage = NULL;
    hs_log_set_sink(NULL, NULL);
    check_timeout(&r, enables, 0, maps, "collector stalls after the release");
}

/* The sweeper fails, crashes or never finishes. */
static void test_sweeper_failures(void)
{
    struct run r;
    check_context("sweeper fails");
    start_workers(2);
    g_sweep_fail = 1;
    g_log_text[0] = '\0';
    hs_log_set_sink(log_sink, NULL);
    run_collect(&r, 5000);
    hs_log_set_sink(NULL, NULL);
    g_sweep_fail = 0;
    CHECK_EQ(r.rc, 0);
    CHECK_EQ(r.finish_rc, -EIO);
    CHECK(strstr(g_log_text, "exit status 1") != NULL);
    CHECK(no_children());

    check_context("sweeper too slow");
    size_t maps = count_maps();
    g_sweep_sleep_ms = 5000;
    int fds[2];
    CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
    struct hs_mu_collect_stats stats;
    hs_log_set_sink(log_sink, NULL);
    CHECK_EQ(hs_mu_collect(&g_heap, 1, fds[1], &stats, 5000), 0);
    g_sweep_sleep_ms = 0;
    close(fds[1]);
    uint64_t start = hs_mu_now_ns();
    CHECK_EQ(hs_mu_collect_reap(&stats, 200), -ETIMEDOUT);
    hs_log_set_sink(NULL, NULL);
    CHECK(hs_mu_now_ns() - start < 1500000000ull);
    CHECK(stats.collector == NULL);
    CHECK_EQ(hs_mu_collect_reap(&stats, 200), 0); /* nothing left */
    close(fds[0]);
    CHECK(no_children());
    CHECK_EQ(count_maps(), maps);
    CHECK_EQ(traced_threads(), 0);
    CHECK_EQ(stop_workers(), 2);
}

/* Reads exactly len bytes (a lingering sweeper never closes the pipe). */
static bool read_exact(int fd, void *buf, size_t len)
{
    size_t got = 0;
    uint64_t end = hs_mu_now_ns() + 10000000000ull;
    while (got < len && hs_mu_now_ns() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return got == len;
}

/* Starts a check whose stub sweeper writes its report and then stays linger_ms (< 0: for
 * ever), and reads the report. Returns the sweeper's pid (0 on failure). */
static pid_t collect_lingering(struct hs_mu_collect_stats *stats, int fds[2], int linger_ms)
{
    CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
    g_sweep_linger_ms = linger_ms;
    int rc = hs_mu_collect(&g_heap, 1, fds[1], stats, 5000);
    g_sweep_linger_ms = 0;
    close(fds[1]);
    CHECK_EQ(rc, 0);
    struct sweep_report rep;
    CHECK(read_exact(fds[0], &rep, sizeof(rep)) && rep.magic == REPORT_MAGIC);
    CHECK(read_exact(fds[0], g_recs, rep.num_threads * sizeof(struct thread_rec)));
    return rc == 0 ? stats->sweeper_pid : 0;
}

/* 'Z', 'X' or gone ('?') once the process has exited. */
static char process_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    return stat_state(path);
}

static void test_release(void)
{
    check_context("release after a complete result: the sweeper's exit is not waited for");
    start_workers(2);
    size_t maps = count_maps();
    struct hs_mu_collect_stats stats;
    int fds[2];
    pid_t sweeper = collect_lingering(&stats, fds, -1);
    CHECK(sweeper > 0);
    CHECK_EQ(hs_mu_collect_release(&stats), 0); /* hs_mu_collect_finish: -ETIMEDOUT */
    CHECK(stats.collector == NULL);
    CHECK(no_children()); /* the sweeper is not the program's child */
    /* Killed by its parent-death signal, reaped by whoever reaps orphans. */
    uint64_t end = hs_mu_now_ns() + 5000000000ull;
    while (!strchr("ZX?", process_state(sweeper)) && hs_mu_now_ns() < end)
        hs_mu_sleep_ns(1000000);
    CHECK(strchr("ZX?", process_state(sweeper)) != NULL);
    close(fds[0]);
    CHECK_EQ(count_maps(), maps);
    CHECK_EQ(traced_threads(), 0);

    check_context("release in a child subreaper waits instead (the orphan would be its child)");
    CHECK_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    collect_lingering(&stats, fds, 1000); /* exits on its own a second after its report */
    CHECK_EQ(hs_mu_collect_release(&stats), 0);
    CHECK(stats.collector == NULL);
    CHECK(no_children()); /* reaped by the collector, not orphaned to this process */
    CHECK_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
    close(fds[0]);
    CHECK_EQ(count_maps(), maps);
    CHECK_EQ(stop_workers(), 2);
}

static void slow_release_stage(enum hs_mu_collect_stage stage, void *arg)
{
    (void)arg;
    if (stage == HS_MU_COLLECT_STAGE_FORKED)
        hs_mu_sleep_ns(200000000ull); /* the threads stay stopped a while after the fork */
}

static void test_sweeper_waits_for_release(void)
{
    check_context("the sweeper starts only once the threads are released");
    start_workers(2);
    g_watch.n = 2;
    g_watch.tid[0] = g_workers[0].tid;
    g_watch.tid[1] = g_workers[1].tid;
    hs_mu_collect_test_hooks.stage = slow_release_stage;
    struct run r;
    run_collect(&r, 5000);
    hs_mu_collect_test_hooks.stage = NULL;
    g_watch.n = 0;
    CHECK_EQ(r.rc, 0);
    CHECK(r.got_report);
    CHECK_EQ(r.rep.workers_stopped, 0);
    CHECK_EQ(r.finish_rc, 0);
    CHECK(no_children());
    CHECK_EQ(stop_workers(), 2);
}

static void test_invalid(void)
{
    check_context("invalid arguments");
    struct hs_mu_collect_stats stats;
    struct hs_mu_heap_source none = {0};
    CHECK_EQ(hs_mu_collect(NULL, 1, 1, &stats, 100), -EINVAL);
    CHECK_EQ(hs_mu_collect(&none, 1, 1, &stats, 100), -EINVAL);
    CHECK_EQ(hs_mu_collect(&g_heap, 1, 1, &stats, 0), -EINVAL);
    CHECK(stats.collector == NULL);
    CHECK_EQ(hs_mu_collect_finish(&stats), 0);
}

int main(void)
{
    g_main_pid = getpid();
    setup_blocks();
    g_probe_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    test_invalid();
    test_counts();
    test_thread_exits();
    test_signal();
    test_new_thread();
    test_repeat();
    test_timeouts();
    test_sweeper_failures();
    test_release();
    test_sweeper_waits_for_release();
    close(g_probe_fd);
    return check_report();
}
