/* attach_bench.c: a long-running program for bench/attach.sh, which attaches the profiler to
 * it while it runs (started with nothing preloaded) and compares its speed before, during and
 * after the session.
 *
 *   attach_bench [THREADS]
 * Prints "ready pid=P", then reads commands on stdin, one per line:
 *   run    one phase: each of THREADS threads makes 1,000,000 malloc/free pairs (16 B-2 KiB,
 *          a ring of 256 live blocks); prints "phase MS checksum=X" (MS: wall time of the
 *          phase, X the same in every run)
 *   quit   exit
 * Between phases every thread is blocked (the main one in read, the others on a condition
 * variable), as in an idle server.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 1000000
#define MAX_THREADS 16

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_go = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static unsigned g_phase, g_finished;
static uint64_t g_sums[MAX_THREADS];

__attribute__((noinline)) static void *site_bench(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static uint64_t one_phase(unsigned seed)
{
    unsigned char *ring[256] = {0};
    uint64_t sum = 0;
    for (unsigned i = 0; i < PAIRS; i++) {
        unsigned slot = i & 255;
        if (ring[slot] != NULL)
            sum = sum * 31 + ring[slot][0];
        free(ring[slot]);
        size_t n = 16 + (size_t)((i * 2654435761u + seed) % 2032);
        ring[slot] = site_bench(n);
        ring[slot][0] = (unsigned char)(i + seed);
    }
    for (unsigned i = 0; i < 256; i++)
        free(ring[i]);
    return sum;
}

static void *worker(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg, seen = 0;
    for (;;) {
        pthread_mutex_lock(&g_lock);
        while (g_phase == seen)
            pthread_cond_wait(&g_go, &g_lock);
        seen = g_phase;
        pthread_mutex_unlock(&g_lock);
        uint64_t sum = one_phase(index);
        pthread_mutex_lock(&g_lock);
        g_sums[index] = sum;
        g_finished++;
        pthread_cond_signal(&g_done);
        pthread_mutex_unlock(&g_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "usage: attach_bench [THREADS (1-%d)]\n", MAX_THREADS);
        return 2;
    }
    for (int t = 0; t < threads; t++) {
        pthread_t id;
        pthread_create(&id, NULL, worker, (void *)(uintptr_t)t);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", (int)getpid());
    char line[64];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        if (strncmp(line, "quit", 4) == 0)
            break;
        if (strncmp(line, "run", 3) != 0)
            continue;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pthread_mutex_lock(&g_lock);
        g_finished = 0;
        g_phase++;
        pthread_cond_broadcast(&g_go);
        while (g_finished < (unsigned)threads)
            pthread_cond_wait(&g_done, &g_lock);
        pthread_mutex_unlock(&g_lock);
        clock_gettime(CLOCK_MONOTONIC, &b);
        uint64_t sum = 0;
        for (int t = 0; t < threads; t++)
            sum = sum * 1099511628211ull + g_sums[t];
        printf("phase %.3f checksum=%llu\n",
               (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6,
               (unsigned long long)sum);
    }
    return 0;
}
