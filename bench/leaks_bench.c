/* leaks_bench.c: the unreachable-memory check on a big heap, heapscope against LeakSanitizer.
 *
 *   leaks_bench N [BYTES [busy]]
 *       holds N live blocks of BYTES bytes (1000 by default; a global array points to them)
 *       plus 10 leaked ones of 1000 bytes, runs one check and prints
 *       "result blocks=N bytes=BYTES busy=0|1 ... leaks=L pause_ms=P total_ms=T"
 *       With "busy", a thread allocates, frees and writes memory for the whole check (a
 *       program that keeps working while it is checked): it takes one of the two CPUs and
 *       writes to the heap the snapshot shares.
 *
 * Built twice: linked with libmemunreachable (GetUnreachableMemory; the pause is the time the
 * threads were stopped), and with clang -fsanitize=leak -DUSE_LSAN
 * (__lsan_do_recoverable_leak_check, which keeps every thread stopped for the whole check, so
 * its pause is its total). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef USE_LSAN
int __lsan_do_recoverable_leak_check(void);
#else
#include <heapscope/memunreachable.h>
#endif

#define LEAK_BLOCK 1000
#define BUSY_SLOTS 4096

static void **g_blocks;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Escapes through here so that the compiler cannot drop the allocations; overwritten, so
 * nothing refers to them afterwards. */
static void *volatile g_sink;

static __attribute__((noinline)) void leak_some(void)
{
    for (int i = 0; i < 10; i++) {
        char *p = malloc(LEAK_BLOCK);
        memset(p, 0, LEAK_BLOCK);
        g_sink = p;
    }
    g_sink = NULL;
}

/* The busy thread: replaces random blocks of its own table (reachable through it) and writes
 * to its blocks and to the big ones, until told to stop. */
static void *g_busy_slots[BUSY_SLOTS];
static int g_busy_stop;
static size_t g_busy_n;

static void *busy_main(void *arg)
{
    (void)arg;
    uint64_t x = 88172645463325252ull, rounds = 0;
    while (!__atomic_load_n(&g_busy_stop, __ATOMIC_RELAXED)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = x % BUSY_SLOTS, size = 16 + x % 2000;
        free(g_busy_slots[k]);
        g_busy_slots[k] = malloc(size);
        memset(g_busy_slots[k], (int)(x & 0x7f), size);
        ((char *)g_blocks[(x >> 20) % g_busy_n])[0] = (char)x; /* a page the snapshot shares */
        rounds++;
    }
    return (void *)(uintptr_t)rounds;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
    size_t block = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
    int busy = argc > 3 && strcmp(argv[3], "busy") == 0;
    if (n == 0 || block == 0 || (argc > 3 && !busy)) {
        fprintf(stderr, "usage: leaks_bench N [BYTES [busy]]\n");
        return 2;
    }
    g_blocks = calloc(n, sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        g_blocks[i] = malloc(block);
        memset(g_blocks[i], (int)(i & 0x7f), block); /* data, not pointers */
    }
    leak_some();
    pthread_t thread;
    if (busy) {
        g_busy_n = n;
        if (pthread_create(&thread, NULL, busy_main, NULL) != 0) {
            fprintf(stderr, "leaks_bench: cannot start the busy thread\n");
            return 1;
        }
        struct timespec warm = {0, 50 * 1000 * 1000};
        nanosleep(&warm, NULL);
    }

    double start = now_ms();
#ifdef USE_LSAN
    int leaked = __lsan_do_recoverable_leak_check();
    double total = now_ms() - start;
    const char *leaks = leaked ? "yes" : "no";
    double pause = total;
#else
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, 10)) {
        fprintf(stderr, "leaks_bench: the check failed\n");
        return 1;
    }
    double total = now_ms() - start;
    struct UnreachableMemoryStats stats;
    GetLastUnreachableMemoryStats(&stats);
    char leaks[32];
    snprintf(leaks, sizeof(leaks), "%zu", info.num_leaks);
    double pause = stats.pause_ns / 1e6;
    FreeUnreachableMemory(&info);
#endif
    if (busy) {
        __atomic_store_n(&g_busy_stop, 1, __ATOMIC_RELAXED);
        pthread_join(thread, NULL);
        for (size_t k = 0; k < BUSY_SLOTS; k++)
            free(g_busy_slots[k]);
    }
    printf("result blocks=%zu bytes=%zu busy=%d leaks=%s pause_ms=%.2f total_ms=%.1f\n", n, block,
           busy, leaks, pause, total);
    for (size_t i = 0; i < n; i++)
        free(g_blocks[i]);
    free(g_blocks);
    return 0;
}
