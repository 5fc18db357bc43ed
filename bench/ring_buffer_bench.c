/* ring_buffer_bench.c: the cost of the profiler's shared ring buffer
 * (src/profiler/ring_buffer.c).
 *
 *   ring_buffer_bench [ROUNDS]
 *
 * Writer: the cost of one write of a 64-byte and of an 8 KiB record, with 1 and 2 writer
 * threads, on the default 8 MiB buffer. Each writer times batches of records (10000 of 64
 * bytes, 400 of 8 KiB: long enough for two writers to overlap) and the median batch, divided
 * by its size, is reported, with the 90th percentile and the mean. Two settings:
 *   alone        nothing reads while a batch is timed (the buffer is drained between
 *                batches, untimed): hs_rb_write's own cost.
 *   with reader  a reader thread drains the buffer all along; writers use hs_rb_write_retry
 *                (block_client: a full buffer means sleeping 100 us and trying again), so
 *                when the writers outrun the reader the mean shows the waits.
 *
 * Reader: the buffer is filled with records of one size, then drained by hs_rb_peek, a copy
 * of the payload out of the shared memory (what the daemon does first) and hs_rb_consume;
 * the median of the drains is reported in records and bytes per second. "same thread": the
 * records were just written by the reading thread (cache-hot, an upper bound); "other
 * thread": they were written by a thread that then waits, so they come from another core.
 */
#define _GNU_SOURCE
#include "ring_buffer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WRITERS 2

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static void drain(struct hs_rb *rb)
{
    struct hs_rb_record rec;
    while (hs_rb_peek(rb, &rec) == HS_RB_OK)
        hs_rb_consume(rb);
}

struct run {
    struct hs_rb rb;
    size_t len;
    size_t batch;
    unsigned rounds;
    int with_reader;
    int writers;
    pthread_barrier_t start, round_done, drained;
    int writers_done;
    unsigned ready;     /* writers at the start of a batch, counted over all rounds */
    double *per_record; /* [writer * rounds + round], ns */
};

struct warg {
    struct run *run;
    int id;
};

static void *writer(void *arg)
{
    struct warg *wa = arg;
    struct run *r = wa->run;
    static uint8_t bufs[MAX_WRITERS][8192];
    uint8_t *buf = bufs[wa->id];
    memset(buf, wa->id + 1, sizeof(bufs[0]));
    pthread_barrier_wait(&r->start);
    for (unsigned round = 0; round < r->rounds; round++) {
        /* Start together, both on a CPU (spinning), so that two writers really overlap. */
        __atomic_fetch_add(&r->ready, 1, __ATOMIC_ACQ_REL);
        while (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) < (unsigned)r->writers * (round + 1))
            __builtin_ia32_pause();
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < r->batch; i++) {
            bool wake;
            /* Alone, the buffer has room for every batch; with the reader, 1 s of retries. */
            enum hs_rb_status st =
                r->with_reader ? hs_rb_write_retry(&r->rb, buf, r->len, 1000000000ull, &wake)
                               : hs_rb_write(&r->rb, buf, r->len, &wake);
            if (st != HS_RB_OK) {
                fprintf(stderr, "write failed: %s\n", hs_rb_status_text(st));
                exit(1);
            }
        }
        uint64_t t = now_ns() - t0;
        r->per_record[(size_t)wa->id * r->rounds + round] = (double)t / (double)r->batch;
        if (!r->with_reader) {
            /* Every writer finishes its batch, then the main thread drains, untimed. */
            pthread_barrier_wait(&r->round_done);
            pthread_barrier_wait(&r->drained);
        }
    }
    return NULL;
}

static void *reader(void *arg)
{
    struct run *r = arg;
    struct hs_rb_record rec;
    static uint8_t copy[8192];
    for (;;) {
        enum hs_rb_status st = hs_rb_peek(&r->rb, &rec);
        if (st == HS_RB_OK) {
            memcpy(copy, rec.data, rec.len);
            __asm__ volatile("" : : "r"(copy) : "memory"); /* keep the copy */
            hs_rb_consume(&r->rb);
        } else if (__atomic_load_n(&r->writers_done, __ATOMIC_ACQUIRE) && st == HS_RB_EMPTY) {
            return NULL;
        } else {
            __builtin_ia32_pause();
        }
    }
}

static void bench_writer(size_t len, int writers, int with_reader, unsigned rounds)
{
    static struct run r;
    memset(&r, 0, sizeof(r));
    if (hs_rb_create(&r.rb, HS_RB_DEFAULT_SIZE) != 0) {
        perror("hs_rb_create");
        exit(1);
    }
    r.len = len;
    r.batch = len <= 64 ? 10000 : 400;
    r.rounds = rounds;
    r.with_reader = with_reader;
    r.writers = writers;
    r.per_record = calloc((size_t)writers * rounds, sizeof(double));
    pthread_barrier_init(&r.start, NULL, (unsigned)writers + 1);
    pthread_barrier_init(&r.round_done, NULL, (unsigned)writers + 1);
    pthread_barrier_init(&r.drained, NULL, (unsigned)writers + 1);

    /* Touch every page of the buffer once, so that page faults are not timed. */
    for (int i = 0; i < 2; i++) {
        size_t n = HS_RB_DEFAULT_SIZE / (len + 8 + 8);
        for (size_t k = 0; k < n; k++) {
            bool wake;
            static uint8_t z[8192];
            hs_rb_write(&r.rb, z, len, &wake);
        }
        drain(&r.rb);
    }

    pthread_t w[MAX_WRITERS], rd;
    struct warg args[MAX_WRITERS];
    for (int i = 0; i < writers; i++) {
        args[i] = (struct warg){&r, i};
        pthread_create(&w[i], NULL, writer, &args[i]);
    }
    if (with_reader)
        pthread_create(&rd, NULL, reader, &r);
    pthread_barrier_wait(&r.start);
    if (!with_reader) {
        for (unsigned round = 0; round < rounds; round++) {
            pthread_barrier_wait(&r.round_done);
            drain(&r.rb);
            pthread_barrier_wait(&r.drained);
        }
    }
    for (int i = 0; i < writers; i++)
        pthread_join(w[i], NULL);
    __atomic_store_n(&r.writers_done, 1, __ATOMIC_RELEASE);
    if (with_reader)
        pthread_join(rd, NULL);

    size_t n = (size_t)writers * rounds;
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += r.per_record[i] / (double)n;
    double med = percentile(r.per_record, n, 0.5);
    double p90 = percentile(r.per_record, n, 0.9);
    struct hs_rb_stats st;
    hs_rb_get_stats(&r.rb, &st);
    printf("writer  %5zu B  %d thread%s  %-11s  median %6.1f ns/record  p90 %6.1f  mean %7.1f"
           "  (%llu overflows, %llu lock waits)\n",
           len, writers, writers > 1 ? "s" : " ", with_reader ? "with reader" : "alone", med, p90,
           mean, (unsigned long long)st.overflows, (unsigned long long)st.spinlock_waits);
    free(r.per_record);
    pthread_barrier_destroy(&r.start);
    pthread_barrier_destroy(&r.round_done);
    pthread_barrier_destroy(&r.drained);
    hs_rb_destroy(&r.rb);
}

struct fill_arg {
    struct hs_rb *rb;
    size_t len;
    unsigned rounds;
    size_t records;
    pthread_barrier_t filled, drained;
};

static size_t fill(struct hs_rb *rb, size_t len)
{
    static uint8_t buf[8192];
    memset(buf, 7, sizeof(buf));
    bool wake;
    size_t n = 0;
    while (hs_rb_write(rb, buf, len, &wake) == HS_RB_OK)
        n++;
    return n;
}

static void *filler(void *arg)
{
    struct fill_arg *f = arg;
    for (unsigned round = 0; round < f->rounds; round++) {
        f->records = fill(f->rb, f->len);
        pthread_barrier_wait(&f->filled);
        pthread_barrier_wait(&f->drained);
    }
    return NULL;
}

/* Drains the buffer, copying each payload out; returns the records read. */
static size_t drain_copy(struct hs_rb *rb)
{
    static uint8_t copy[8192];
    struct hs_rb_record rec;
    size_t got = 0;
    while (hs_rb_peek(rb, &rec) == HS_RB_OK) {
        memcpy(copy, rec.data, rec.len);
        __asm__ volatile("" : : "r"(copy) : "memory"); /* keep the copy */
        hs_rb_consume(rb);
        got++;
    }
    return got;
}

static void bench_reader(size_t len, int other_thread, unsigned rounds)
{
    struct hs_rb rb;
    if (hs_rb_create(&rb, HS_RB_DEFAULT_SIZE) != 0) {
        perror("hs_rb_create");
        exit(1);
    }
    double *rate = calloc(rounds, sizeof(double));
    struct fill_arg f = {.rb = &rb, .len = len, .rounds = rounds + 1};
    pthread_t th;
    if (other_thread) {
        pthread_barrier_init(&f.filled, NULL, 2);
        pthread_barrier_init(&f.drained, NULL, 2);
        pthread_create(&th, NULL, filler, &f);
    }
    for (unsigned round = 0; round < rounds + 1; round++) {
        if (other_thread)
            pthread_barrier_wait(&f.filled);
        else
            f.records = fill(&rb, len);
        uint64_t t0 = now_ns();
        size_t got = drain_copy(&rb);
        uint64_t t = now_ns() - t0;
        if (other_thread)
            pthread_barrier_wait(&f.drained);
        if (got != f.records) {
            fprintf(stderr, "reader lost records\n");
            exit(1);
        }
        if (round > 0) /* the first round faults the pages in */
            rate[round - 1] = (double)got / ((double)t / 1e9);
    }
    if (other_thread) {
        pthread_join(th, NULL);
        pthread_barrier_destroy(&f.filled);
        pthread_barrier_destroy(&f.drained);
    }
    double med = percentile(rate, rounds, 0.5);
    printf("reader  %5zu B  %-12s  median %6.1f M records/s  %6.0f MB/s  (%zu records per "
           "drain)\n",
           len, other_thread ? "other thread" : "same thread", med / 1e6, med * (double)len / 1e6,
           f.records);
    free(rate);
    hs_rb_destroy(&rb);
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 100;
    if (rounds < 2)
        rounds = 2;
    size_t sizes[] = {64, 8192};
    for (int with_reader = 0; with_reader < 2; with_reader++)
        for (size_t s = 0; s < 2; s++)
            for (int writers = 1; writers <= MAX_WRITERS; writers++)
                bench_writer(sizes[s], writers, with_reader, rounds);
    for (int other = 0; other < 2; other++)
        for (size_t s = 0; s < 2; s++)
            bench_reader(sizes[s], other, rounds < 50 ? rounds : 50);
    return 0;
}
