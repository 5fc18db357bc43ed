/* malloc_bench.c: a deterministic malloc/free-heavy workload.
 *
 * Each thread keeps a ring of live slots. One step draws a random slot and a random call
 * site; the allocation replaces what the slot held (which is freed first), so frees are not
 * LIFO and there is a live working set of a few MiB. realloc_grow instead grows the slot's
 * block in place (or allocates it, if the slot is empty). Sizes follow real programs: mostly
 * small (16-256 B), some medium (256 B-4 KiB), a few large (64-192 KiB).
 *
 * Every allocation is written to (its first bytes and its last byte) and read back when it
 * is freed, into a checksum, so guards and fills meet realistically used memory and the
 * compiler cannot drop anything. For one (seed, threads, ops) the checksum and the work of
 * every call site are the same whatever allocator runs underneath.
 *
 * Each call site is its own noinline function that calls the allocator itself (never as a
 * tail call), so a profiler's per-call-site figures can be checked against --ground-truth,
 * which prints what the program really did, per site, summed over threads. The slot rings
 * are mmapped, so apart from libc's own (start-up, pthread_create's TLS, stdio's buffer
 * when the results are printed), the benchmark's only heap calls are the ones counted.
 *
 * Output (stdout, one line of key=value, then the --ground-truth table if asked for):
 *   result threads=T ops_per_thread=N ops=TOTAL seconds=S.SSS mops_per_s=M checksum=X
 *          maxrss_kib=K cpu_seconds=C
 * ops counts every call to malloc, calloc, realloc and free, including the final frees.
 * seconds is CLOCK_MONOTONIC from the moment the first thread starts its steps to the
 * moment the last one has finished (set-up excluded). maxrss_kib is getrusage's peak RSS of
 * the whole process. cpu_seconds is the workers' own CPU time over their steps, summed (on a
 * loaded machine it leaves out the time a worker waited for a CPU, which seconds counts).
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
#include <sys/resource.h>
#include <time.h>

/* noclone (gcc's) keeps each call site a distinct frame; clang (the LeakSanitizer build)
 * does not clone functions and does not know the attribute. */
#ifdef __clang__
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

#define DEFAULT_OPS 12000000ULL
#define DEFAULT_SLOTS 4096
#define DEFAULT_SEED 42ULL
#define MAX_THREADS 64
#define REALLOC_CAP 16384
#define TOUCH_BYTES 32

enum site {
    SITE_SMALL_16_64,
    SITE_SMALL_64_256,
    SITE_CALLOC,
    SITE_MEDIUM_256_4K,
    SITE_REALLOC_GROW,
    SITE_LARGE_64K,
    SITE_COUNT
};

/* The function names, as a symbolizer will show them. */
static const char *const site_names[SITE_COUNT] = {
    "alloc_small_16_64",   "alloc_small_64_256", "calloc_site",
    "alloc_medium_256_4k", "realloc_grow",       "alloc_large_64k",
};

/* Probability of each site per step, in 1/1000. */
static const unsigned site_permille[SITE_COUNT] = {520, 250, 80, 100, 48, 2};

struct slot {
    unsigned char *p;
    uint32_t size;
    uint8_t site;
};

struct site_stats {
    uint64_t calls;      /* calls made at this site */
    uint64_t bytes;      /* bytes requested there (realloc: the new size) */
    uint64_t live;       /* blocks from this site live now */
    uint64_t live_bytes; /* and their requested bytes */
};

/* Aligned so that two threads' workers never share a cache line. */
struct worker {
    _Alignas(128) unsigned index;
    uint64_t rng;
    uint64_t target_ops;
    size_t nslots;
    struct slot *slots;
    size_t slots_map_size;
    pthread_barrier_t *barrier;
    double start, end; /* CLOCK_MONOTONIC around run_steps */
    double cpu;        /* this thread's CPU time over run_steps */

    uint64_t ops;
    uint64_t checksum;
    uint64_t frees, freed_bytes;
    struct site_stats sites[SITE_COUNT];
    struct site_stats at_end[SITE_COUNT]; /* snapshot before the final frees */
    int failed;
};

/* splitmix64: small, fast, every output bit usable. */
static inline uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fail(struct worker *w, const char *what, size_t size)
{
    fprintf(stderr, "malloc_bench: thread %u: %s (size %zu)\n", w->index, what, size);
    w->failed = 1;
}

#define FAIL(w, what, size)                                                                        \
    do {                                                                                           \
        fail(w, what, size);                                                                       \
        return;                                                                                    \
    } while (0)

/* Writes the first bytes and the last byte of a block. */
static inline void touch(unsigned char *p, size_t size, unsigned char v)
{
    memset(p, v, size < TOUCH_BYTES ? size : TOUCH_BYTES);
    p[size - 1] = (unsigned char)(v ^ 0x5a);
}

static inline void account_alloc(struct worker *w, struct slot *s, enum site site, unsigned char *p,
                                 size_t size)
{
    s->p = p;
    s->size = (uint32_t)size;
    s->site = (uint8_t)site;
    w->sites[site].calls++;
    w->sites[site].bytes += size;
    w->sites[site].live++;
    w->sites[site].live_bytes += size;
}

static inline void account_release(struct worker *w, struct slot *s)
{
    w->sites[s->site].live--;
    w->sites[s->site].live_bytes -= s->size;
    w->checksum = w->checksum * 31 + s->p[0] + ((uint64_t)s->p[s->size - 1] << 8) + s->size;
}

/* ---- call sites ---------------------------------------------------------------------- */

static NOINLINE void alloc_small_16_64(struct worker *w, struct slot *s, uint64_t r)
{
    size_t size = 16 + r % 49;
    unsigned char *p = malloc(size);
    if (!p)
        FAIL(w, "malloc failed in alloc_small_16_64", size);
    touch(p, size, (unsigned char)(r >> 40));
    account_alloc(w, s, SITE_SMALL_16_64, p, size);
}

static NOINLINE void alloc_small_64_256(struct worker *w, struct slot *s, uint64_t r)
{
    size_t size = 65 + r % 192;
    unsigned char *p = malloc(size);
    if (!p)
        FAIL(w, "malloc failed in alloc_small_64_256", size);
    touch(p, size, (unsigned char)(r >> 41));
    account_alloc(w, s, SITE_SMALL_64_256, p, size);
}

static NOINLINE void calloc_site(struct worker *w, struct slot *s, uint64_t r)
{
    size_t nmemb = 1 + r % 16, elem = 8 + (r >> 8) % 25; /* 8 .. 512 bytes */
    size_t size = nmemb * elem;
    unsigned char *p = calloc(nmemb, elem);
    if (!p)
        FAIL(w, "calloc failed in calloc_site", size);
    /* calloc must zero, debug options or not. */
    size_t head = size < TOUCH_BYTES ? size : TOUCH_BYTES;
    for (size_t i = 0; i < head; i++)
        if (p[i])
            FAIL(w, "calloc returned non-zero memory", size);
    if (p[size - 1] || p[size / 2])
        FAIL(w, "calloc returned non-zero memory", size);
    touch(p, size, (unsigned char)(r >> 42));
    account_alloc(w, s, SITE_CALLOC, p, size);
}

static NOINLINE void alloc_medium_256_4k(struct worker *w, struct slot *s, uint64_t r)
{
    size_t size = 257 + r % 3840;
    unsigned char *p = malloc(size);
    if (!p)
        FAIL(w, "malloc failed in alloc_medium_256_4k", size);
    touch(p, size, (unsigned char)(r >> 43));
    account_alloc(w, s, SITE_MEDIUM_256_4K, p, size);
}

static NOINLINE void alloc_large_64k(struct worker *w, struct slot *s, uint64_t r)
{
    size_t size = 65536 + r % 131072; /* 64 KiB .. 192 KiB: straddles the mmap threshold */
    unsigned char *p = malloc(size);
    if (!p)
        FAIL(w, "malloc failed in alloc_large_64k", size);
    touch(p, size, (unsigned char)(r >> 44));
    account_alloc(w, s, SITE_LARGE_64K, p, size);
}

/* Grows the slot's block by about half (capped), or allocates one if the slot is empty.
 * The old block's data must survive: its first byte is checked. */
static NOINLINE void realloc_grow(struct worker *w, struct slot *s, uint64_t r)
{
    size_t size;
    unsigned char first = 0;
    int had_block = s->p != NULL;
    if (had_block) {
        size = s->size + s->size / 2 + 16 + r % 64;
        if (size > REALLOC_CAP)
            size = s->size > REALLOC_CAP ? s->size : REALLOC_CAP;
        first = s->p[0];
        account_release(w, s);
    } else {
        size = 32 + r % 97;
    }
    unsigned char *p = realloc(s->p, size);
    if (!p)
        FAIL(w, "realloc failed in realloc_grow", size);
    if (had_block && p[0] != first) {
        account_alloc(w, s, SITE_REALLOC_GROW, p, size); /* so the final frees free it */
        FAIL(w, "realloc lost the block's contents", size);
    }
    touch(p, size, (unsigned char)(r >> 45));
    account_alloc(w, s, SITE_REALLOC_GROW, p, size);
}

static NOINLINE void free_slot(struct worker *w, struct slot *s)
{
    account_release(w, s);
    w->frees++;
    w->freed_bytes += s->size;
    free(s->p);
    s->p = NULL;
}

/* ---- the workload -------------------------------------------------------------------- */

/* site_for[x]: the site a uniform x in 0..999 picks (filled from site_permille in main). */
static uint8_t site_for[1000];

static void init_site_table(void)
{
    unsigned x = 0;
    for (int i = 0; i < SITE_COUNT; i++)
        for (unsigned k = 0; k < site_permille[i] && x < 1000; k++)
            site_for[x++] = (uint8_t)i;
    while (x < 1000)
        site_for[x++] = SITE_COUNT - 1;
}

static void run_steps(struct worker *w)
{
    size_t live = 0;
    /* Stop so that the final frees bring the total to the target (give or take one). */
    while (w->ops + live < w->target_ops && !w->failed) {
        uint64_t r = next_random(&w->rng);
        struct slot *s = &w->slots[(r >> 32) % w->nslots];
        enum site site = (enum site)site_for[(uint32_t)r % 1000];
        uint64_t r2 = next_random(&w->rng);

        if (site == SITE_REALLOC_GROW) {
            live += s->p == NULL;
            realloc_grow(w, s, r2);
            w->ops++;
            continue;
        }
        if (s->p) {
            free_slot(w, s);
            w->ops++;
        } else {
            live++;
        }
        switch (site) {
        case SITE_SMALL_16_64:
            alloc_small_16_64(w, s, r2);
            break;
        case SITE_SMALL_64_256:
            alloc_small_64_256(w, s, r2);
            break;
        case SITE_CALLOC:
            calloc_site(w, s, r2);
            break;
        case SITE_MEDIUM_256_4K:
            alloc_medium_256_4k(w, s, r2);
            break;
        case SITE_LARGE_64K:
            alloc_large_64k(w, s, r2);
            break;
        default:
            break;
        }
        w->ops++;
    }
    memcpy(w->at_end, w->sites, sizeof(w->at_end));
    for (size_t i = 0; i < w->nslots; i++) {
        if (w->slots[i].p) {
            free_slot(w, &w->slots[i]);
            w->ops++;
        }
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->barrier);
    w->start = now_seconds();
    double cpu0 = thread_cpu_seconds();
    run_steps(w);
    w->cpu = thread_cpu_seconds() - cpu0;
    w->end = now_seconds();
    return NULL;
}

/* ---- driver -------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: malloc_bench [--threads N] [--ops N] [--seed N] [--slots N] "
            "[--ground-truth]\n"
            "  --threads N     worker threads (default 1, max %d)\n"
            "  --ops N         malloc/calloc/realloc/free calls per thread (default %llu)\n"
            "  --seed N        PRNG seed; thread i uses seed + i (default %llu)\n"
            "  --slots N       live slots per thread (default %d)\n"
            "  --ground-truth  also print the per-call-site counts and bytes\n",
            MAX_THREADS, DEFAULT_OPS, DEFAULT_SEED, DEFAULT_SLOTS);
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

static void print_ground_truth(const struct worker *workers, unsigned nthreads, uint64_t seed,
                               uint64_t ops)
{
    struct site_stats sum[SITE_COUNT] = {0};
    struct site_stats end[SITE_COUNT] = {0};
    uint64_t frees = 0, freed_bytes = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        for (int i = 0; i < SITE_COUNT; i++) {
            sum[i].calls += workers[t].sites[i].calls;
            sum[i].bytes += workers[t].sites[i].bytes;
            end[i].live += workers[t].at_end[i].live;
            end[i].live_bytes += workers[t].at_end[i].live_bytes;
        }
        frees += workers[t].frees;
        freed_bytes += workers[t].freed_bytes;
    }
    printf("# ground truth: seed=%" PRIu64 " threads=%u ops_per_thread=%" PRIu64
           " (summed over threads)\n",
           seed, nthreads, ops);
    printf("# live_at_end: blocks from the site still live after the main loop, before "
           "the final frees\n");
    printf("# realloc_grow calls = realloc() calls (bytes = new sizes; realloc(NULL) "
           "included); free_slot = free() calls\n");
    printf("%-22s %12s %16s %12s %18s\n", "site", "calls", "bytes", "live_at_end",
           "live_bytes_at_end");
    uint64_t calls = 0, bytes = 0;
    for (int i = 0; i < SITE_COUNT; i++) {
        printf("%-22s %12" PRIu64 " %16" PRIu64 " %12" PRIu64 " %18" PRIu64 "\n", site_names[i],
               sum[i].calls, sum[i].bytes, end[i].live, end[i].live_bytes);
        calls += sum[i].calls;
        bytes += sum[i].bytes;
    }
    printf("%-22s %12" PRIu64 " %16" PRIu64 " %12s %18s\n", "free_slot", frees, freed_bytes, "-",
           "-");
    printf("%-22s %12" PRIu64 " %16" PRIu64 " %12s %18s\n", "total_allocating", calls, bytes, "-",
           "-");
}

int main(int argc, char **argv)
{
    uint64_t nthreads = 1, ops = DEFAULT_OPS, seed = DEFAULT_SEED, nslots = DEFAULT_SLOTS;
    int ground_truth = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t *target = NULL;
        if (strcmp(a, "--ground-truth") == 0) {
            ground_truth = 1;
            continue;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--threads") == 0) {
            target = &nthreads;
        } else if (strcmp(a, "--ops") == 0) {
            target = &ops;
        } else if (strcmp(a, "--seed") == 0) {
            target = &seed;
        } else if (strcmp(a, "--slots") == 0) {
            target = &nslots;
        } else {
            fprintf(stderr, "malloc_bench: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (i + 1 >= argc || !parse_u64(argv[i + 1], target)) {
            fprintf(stderr, "malloc_bench: %s needs a non-negative number\n", a);
            return 2;
        }
        i++;
    }
    if (nthreads < 1 || nthreads > MAX_THREADS || nslots < 1 || nslots > (1u << 24)) {
        fprintf(stderr, "malloc_bench: --threads must be 1..%d and --slots 1..%u\n", MAX_THREADS,
                1u << 24);
        return 2;
    }

    init_site_table();
    static struct worker workers[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);

    for (unsigned t = 0; t < nthreads; t++) {
        struct worker *w = &workers[t];
        w->index = t;
        w->rng = seed + t;
        w->target_ops = ops;
        w->nslots = nslots;
        w->barrier = &barrier;
        w->slots_map_size = nslots * sizeof(struct slot);
        /* mmap, not malloc: the ring is no part of the measured heap traffic. Zero-filled,
         * and populated now so its page faults are not timed. */
        w->slots = mmap(NULL, w->slots_map_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (w->slots == MAP_FAILED) {
            perror("malloc_bench: mmap");
            return 1;
        }
    }
    /* Every worker runs on a thread of its own, so 1 and 2 threads use the allocator the
     * same way (a non-main arena each, with glibc). */
    for (unsigned t = 0; t < nthreads; t++) {
        int err = pthread_create(&tids[t], NULL, worker_main, &workers[t]);
        if (err) {
            fprintf(stderr, "malloc_bench: pthread_create: %s\n", strerror(err));
            return 1;
        }
    }
    pthread_barrier_wait(&barrier);
    for (unsigned t = 0; t < nthreads; t++)
        pthread_join(tids[t], NULL);
    pthread_barrier_destroy(&barrier);
    /* From the first worker's start to the last one's end: the workers time themselves,
     * since under Valgrind (one thread runs at a time) main may wake long after they ran. */
    double start = workers[0].start, end = workers[0].end;
    for (unsigned t = 1; t < nthreads; t++) {
        if (workers[t].start < start)
            start = workers[t].start;
        if (workers[t].end > end)
            end = workers[t].end;
    }
    double seconds = end - start;

    uint64_t total_ops = 0, checksum = 0;
    double cpu = 0;
    int failed = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        total_ops += workers[t].ops;
        cpu += workers[t].cpu;
        checksum = checksum * 1000003 + workers[t].checksum;
        failed |= workers[t].failed;
        munmap(workers[t].slots, workers[t].slots_map_size);
    }
    if (failed) {
        fprintf(stderr, "malloc_bench: FAILED (see above)\n");
        return 1;
    }

    struct rusage ru;
    long maxrss_kib = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    printf("result threads=%" PRIu64 " ops_per_thread=%" PRIu64 " ops=%" PRIu64
           " seconds=%.3f mops_per_s=%.3f checksum=%016" PRIx64 " maxrss_kib=%ld"
           " cpu_seconds=%.3f\n",
           nthreads, ops, total_ops, seconds, seconds > 0 ? (double)total_ops / seconds / 1e6 : 0.0,
           checksum, maxrss_kib, cpu);
    if (ground_truth)
        print_ground_truth(workers, (unsigned)nthreads, seed, ops);
    return 0;
}
