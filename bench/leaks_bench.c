/* leaks_bench.c: the unreachable-memory check on a big heap, heapscope against LeakSanitizer.
 *
 *   leaks_bench N   holds N live blocks of 1000 bytes (a global array points to them) plus 10
 *                   leaked ones, runs one check and prints
 *                   "result blocks=N leaks=L pause_ms=P total_ms=T"
 *
 * Built twice: linked with libmemunreachable (GetUnreachableMemory; the pause is the time the
 * threads were stopped), and with clang -fsanitize=leak -DUSE_LSAN
 * (__lsan_do_recoverable_leak_check, which keeps every thread stopped for the whole check, so
 * its pause is its total). */
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

#define BLOCK 1000

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
        char *p = malloc(BLOCK);
        memset(p, 0, BLOCK);
        g_sink = p;
    }
    g_sink = NULL;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
    g_blocks = calloc(n, sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        g_blocks[i] = malloc(BLOCK);
        memset(g_blocks[i], (int)(i & 0x7f), BLOCK); /* data, not pointers */
    }
    leak_some();

    double start = now_ms();
#ifdef USE_LSAN
    int leaked = __lsan_do_recoverable_leak_check();
    double total = now_ms() - start;
    printf("result blocks=%zu leaks=%s pause_ms=%.1f total_ms=%.1f\n", n, leaked ? "yes" : "no",
           total, total);
#else
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, 10)) {
        fprintf(stderr, "leaks_bench: the check failed\n");
        return 1;
    }
    double total = now_ms() - start;
    struct UnreachableMemoryStats stats;
    GetLastUnreachableMemoryStats(&stats);
    printf("result blocks=%zu allocations=%zu leaks=%zu pause_ms=%.2f total_ms=%.1f\n", n,
           info.num_allocations, info.num_leaks, stats.pause_ns / 1e6, total);
    FreeUnreachableMemory(&info);
#endif
    for (size_t i = 0; i < n; i++)
        free(g_blocks[i]);
    free(g_blocks);
    return 0;
}
