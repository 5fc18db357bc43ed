/* alloc_storm.c: a program that allocates several GB/s, for bench/profile.sh's overload test
 * of the sampling profiler (what the profiler does when samples come faster than its daemon
 * unwinds them: wait and raise the interval, or drop).
 *
 * Each thread allocates until it has asked for --mib MiB in all. One step picks one of two
 * call sites, storm_small (16 B-1 KiB) or storm_big (1-16 KiB), each half of the time;
 * the block replaces the oldest of a ring of 256 live blocks (which is freed), so the heap
 * stays small and almost every byte asked for is new traffic. Each block's first and last
 * bytes are written and read back into a checksum. The ring is mmapped: the only heap calls
 * are the counted ones (and libc's own: thread start-up, stdio).
 *
 * Output (stdout):
 *   result threads=T calls=N bytes=B seconds=S gib_per_s=G checksum=X
 *   site storm_small calls=N bytes=B
 *   site storm_big calls=N bytes=B
 * bytes is the sum of the sizes asked of malloc (the ground truth of a profile's alloc_space),
 * summed over threads; seconds is CLOCK_MONOTONIC from the first thread's start to the last
 * one's end. Deterministic for one (seed, threads, mib).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* noclone (gcc's) keeps each call site a distinct frame; clang (the LeakSanitizer build)
 * does not clone functions and does not know the attribute. */
#ifdef __clang__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif
#define MAX_THREADS 16
#define RING 256

struct site_count {
    uint64_t calls, bytes;
};

struct worker {
    _Alignas(128) uint64_t rng;
    uint64_t budget; /* bytes to allocate */
    unsigned char **ring;
    size_t ring_len[RING];
    uint64_t checksum;
    struct site_count small, big;
    double start, end;
    int failed;
};

static inline uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The two call sites: each calls malloc itself, so a profile's leaf frames name them. */
static NOINLINE unsigned char *storm_small(struct worker *w, uint64_t r, size_t *size)
{
    *size = 16 + r % 1009;
    unsigned char *p = malloc(*size);
    if (p != NULL) {
        w->small.calls++;
        w->small.bytes += *size;
    }
    return p;
}

static NOINLINE unsigned char *storm_big(struct worker *w, uint64_t r, size_t *size)
{
    *size = 1024 + r % 15361;
    unsigned char *p = malloc(*size);
    if (p != NULL) {
        w->big.calls++;
        w->big.bytes += *size;
    }
    return p;
}

static void release(struct worker *w, size_t slot)
{
    unsigned char *p = w->ring[slot];
    if (p == NULL)
        return;
    w->checksum = w->checksum * 31 + p[0] + ((uint64_t)p[w->ring_len[slot] - 1] << 8);
    free(p);
    w->ring[slot] = NULL;
}

static NOINLINE void storm(struct worker *w)
{
    uint64_t done = 0;
    size_t slot = 0;
    while (done < w->budget) {
        uint64_t r = next_random(&w->rng);
        size_t size;
        unsigned char *p = (r & 1) ? storm_big(w, r >> 1, &size) : storm_small(w, r >> 1, &size);
        if (p == NULL) {
            fprintf(stderr, "alloc_storm: malloc(%zu) failed\n", size);
            w->failed = 1;
            return;
        }
        p[0] = (unsigned char)(r >> 20);
        p[size - 1] = (unsigned char)(r >> 28);
        release(w, slot);
        w->ring[slot] = p;
        w->ring_len[slot] = size;
        slot = (slot + 1) % RING;
        done += size;
    }
    for (size_t i = 0; i < RING; i++)
        release(w, i);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->start = now_seconds();
    storm(w);
    w->end = now_seconds();
    return NULL;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-')
        return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    uint64_t nthreads = 1, mib = 4096, seed = 7;
    for (int i = 1; i < argc; i++) {
        uint64_t *target = NULL;
        if (strcmp(argv[i], "--threads") == 0)
            target = &nthreads;
        else if (strcmp(argv[i], "--mib") == 0)
            target = &mib;
        else if (strcmp(argv[i], "--seed") == 0)
            target = &seed;
        if (target == NULL || i + 1 >= argc || !parse_u64(argv[i + 1], target)) {
            fprintf(stderr,
                    "usage: alloc_storm [--threads N (1-%d)] [--mib MIB per thread, "
                    "default 4096] [--seed N]\n",
                    MAX_THREADS);
            return 2;
        }
        i++;
    }
    if (nthreads < 1 || nthreads > MAX_THREADS || mib < 1) {
        fprintf(stderr, "alloc_storm: --threads must be 1..%d and --mib at least 1\n", MAX_THREADS);
        return 2;
    }

    static struct worker workers[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (unsigned t = 0; t < nthreads; t++) {
        workers[t].rng = seed + t;
        workers[t].budget = mib << 20;
        workers[t].ring = mmap(NULL, RING * sizeof(*workers[t].ring), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (workers[t].ring == MAP_FAILED) {
            perror("alloc_storm: mmap");
            return 1;
        }
    }
    for (unsigned t = 0; t < nthreads; t++) {
        int err = pthread_create(&tids[t], NULL, worker_main, &workers[t]);
        if (err) {
            fprintf(stderr, "alloc_storm: pthread_create: %s\n", strerror(err));
            return 1;
        }
    }
    for (unsigned t = 0; t < nthreads; t++)
        pthread_join(tids[t], NULL);

    struct site_count small = {0, 0}, big = {0, 0};
    uint64_t checksum = 0;
    double start = workers[0].start, end = workers[0].end;
    int failed = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        const struct worker *w = &workers[t];
        small.calls += w->small.calls;
        small.bytes += w->small.bytes;
        big.calls += w->big.calls;
        big.bytes += w->big.bytes;
        checksum = checksum * 1000003 + w->checksum;
        failed |= w->failed;
        if (w->start < start)
            start = w->start;
        if (w->end > end)
            end = w->end;
    }
    if (failed)
        return 1;
    double seconds = end - start;
    uint64_t bytes = small.bytes + big.bytes;
    printf("result threads=%" PRIu64 " calls=%" PRIu64 " bytes=%" PRIu64
           " seconds=%.3f gib_per_s=%.2f checksum=%016" PRIx64 "\n",
           nthreads, small.calls + big.calls, bytes, seconds,
           seconds > 0 ? (double)bytes / seconds / (1024.0 * 1024 * 1024) : 0.0, checksum);
    printf("site storm_small calls=%" PRIu64 " bytes=%" PRIu64 "\n", small.calls, small.bytes);
    printf("site storm_big calls=%" PRIu64 " bytes=%" PRIu64 "\n", big.calls, big.bytes);
    return 0;
}
