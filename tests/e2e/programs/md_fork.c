/* md_fork.c: fork while other threads allocate with cold unwinder caches, the case where a
 * stack capture in flight at the moment of fork can strand an unwinder lock in the child.
 *
 *   md_fork FORKS THREADS [DEADLINE_MS [FORKERS]]
 *
 * THREADS workers each start short-lived threads one after another, each of which allocates
 * and frees through a few call sites: a new thread's first captures miss libunwind's
 * per-thread frame cache, so they go through unw_step and the locks behind it. The main
 * thread forks FORKS times, at varied moments; each child allocates and frees (so it
 * captures stacks under backtrace and free_track), then _exits 0. With FORKERS > 1 (default
 * 1), FORKERS - 1 more threads fork FORKS times each at the same time as the main thread, so
 * that forks overlap (one thread's fork handlers run while another's fork is under way). The parent waits for
 * each child at most DEADLINE_MS (default 10000, far more than a child needs); a child
 * still running then is killed and reported:
 *   "hung: child of fork K (pid P) still running after D ms"  (exit status 3)
 * Prints "ok" and exits 0 when every child exited 0; "failed: ..." and 1 for any other
 * child status. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 16

static atomic_int g_stop;
static __thread void *volatile t_sink;

/* 256 functions that call each other in a pseudo-random order make stacks out of ~260
 * distinct return addresses: more than libunwind's global cache of unwind rules holds (128
 * entries), so captures keep parsing rules under that cache's lock instead of finding them,
 * which widens the window a fork can fall into. */
typedef void hop_fn(unsigned depth, uint32_t path);
static hop_fn *const g_hops[256];

static __attribute__((noinline)) void leaf(uint32_t path)
{
    size_t n = 16 + path % 512;
    char *p = (path & 1) ? malloc(n) : realloc(calloc(1, n), n * 2);
    t_sink = p; /* the block escapes: the compiler may not drop the calls */
    free(p);
}

/* hop_ABCD, A..D base-4 digits of its index. The empty asm after the call keeps it from
 * being a tail call, so every hop stays on the stack. */
#define HOP(a, b, c, d)                                                                            \
    static __attribute__((noinline)) void hop_##a##b##c##d(unsigned depth, uint32_t path)          \
    {                                                                                              \
        if (depth == 0) {                                                                          \
            leaf(path);                                                                            \
        } else {                                                                                   \
            uint32_t next = path * 1103515245u + 12345u + (a * 64 + b * 16 + c * 4 + d);           \
            g_hops[(next >> 16) & 255](depth - 1, next);                                           \
        }                                                                                          \
        __asm__ volatile("" ::: "memory");                                                         \
    }
#define HOP_D(a, b, c) HOP(a, b, c, 0) HOP(a, b, c, 1) HOP(a, b, c, 2) HOP(a, b, c, 3)
#define HOP_C(a, b) HOP_D(a, b, 0) HOP_D(a, b, 1) HOP_D(a, b, 2) HOP_D(a, b, 3)
#define HOP_B(a) HOP_C(a, 0) HOP_C(a, 1) HOP_C(a, 2) HOP_C(a, 3)
HOP_B(0)
HOP_B(1)
HOP_B(2)
HOP_B(3)

#define REF(a, b, c, d) hop_##a##b##c##d,
#define REF_D(a, b, c) REF(a, b, c, 0) REF(a, b, c, 1) REF(a, b, c, 2) REF(a, b, c, 3)
#define REF_C(a, b) REF_D(a, b, 0) REF_D(a, b, 1) REF_D(a, b, 2) REF_D(a, b, 3)
#define REF_B(a) REF_C(a, 0) REF_C(a, 1) REF_C(a, 2) REF_C(a, 3)
static hop_fn *const g_hops[256] = {REF_B(0) REF_B(1) REF_B(2) REF_B(3)};

/* A new thread: its first captures also miss libunwind's per-thread frame cache. */
static void *short_lived(void *arg)
{
    uint32_t path = (uint32_t)(uintptr_t)arg * 2654435761u;
    for (int i = 0; i < 8; i++) {
        path = path * 1103515245u + 12345u;
        g_hops[path >> 24](4 + path % 5, path);
    }
    return NULL;
}

static void *worker(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, (void *)k++) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static __attribute__((noinline)) void child_work(void)
{
    for (uint32_t i = 0; i < 100; i++)
        g_hops[i](i % 6, i);
}

/* Waits for pid at most deadline_ms; 0 with *status set, or -1 if it is still running. */
static int wait_child(pid_t pid, long deadline_ms, int *status)
{
    for (long waited_us = 0;; waited_us += 1000) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR) {
            perror("waitpid");
            exit(1);
        }
        if (waited_us >= deadline_ms * 1000)
            return -1;
        sleep_us(1000);
    }
}

static int g_forks;
static long g_deadline_ms;

/* Forks g_forks times at varied moments; 0 when every child exited 0, 3 for a child that
 * hung, 1 for any other failure. */
static int fork_loop(uint32_t seed)
{
    int rc = 0;
    for (int k = 0; k < g_forks && rc == 0; k++) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        sleep_us((long)(seed % 2000)); /* fork at varied points of the workers' work */
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            rc = 1;
            break;
        }
        if (pid == 0) {
            child_work();
            _exit(0);
        }
        int status = 0;
        if (wait_child(pid, g_deadline_ms, &status) != 0) {
            printf("hung: child of fork %d (pid %d) still running after %ld ms\n", k, (int)pid,
                   g_deadline_ms);
            fflush(stdout);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            rc = 3;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("failed: child of fork %d ended with status 0x%x\n", k, status);
            rc = 1;
        }
    }
    return rc;
}

static void *forker(void *arg)
{
    return (void *)(intptr_t)fork_loop((uint32_t)(uintptr_t)arg);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: md_fork FORKS THREADS [DEADLINE_MS [FORKERS]]\n");
        return 2;
    }
    g_forks = atoi(argv[1]);
    int threads = atoi(argv[2]);
    g_deadline_ms = argc > 3 ? atol(argv[3]) : 10000;
    int forkers = argc > 4 ? atoi(argv[4]) : 1;
    if (g_forks < 1 || threads < 1 || threads > MAX_WORKERS || g_deadline_ms < 1 || forkers < 1 ||
        forkers > MAX_WORKERS) {
        fprintf(stderr, "md_fork: FORKS >= 1, 1 <= THREADS <= %d, DEADLINE_MS >= 1, "
                        "1 <= FORKERS <= %d\n", MAX_WORKERS, MAX_WORKERS);
        return 2;
    }
    pthread_t workers[MAX_WORKERS], forkers_t[MAX_WORKERS];
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&workers[i], NULL, worker, (void *)(uintptr_t)(i * 1000)) != 0) {
            fprintf(stderr, "md_fork: pthread_create failed\n");
            return 1;
        }
    }
    uint32_t seed = (uint32_t)getpid() * 2654435761u;
    for (int i = 1; i < forkers; i++) {
        if (pthread_create(&forkers_t[i], NULL, forker, (void *)(uintptr_t)(seed + i)) != 0) {
            fprintf(stderr, "md_fork: pthread_create failed\n");
            return 1;
        }
    }
    int rc = fork_loop(seed);
    for (int i = 1; i < forkers; i++) {
        void *other = NULL;
        pthread_join(forkers_t[i], &other);
        if (rc == 0)
            rc = (int)(intptr_t)other;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(workers[i], NULL);
    if (rc == 0)
        printf("ok\n");
    return rc;
}
