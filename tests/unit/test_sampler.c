/* test_sampler.c: statistics of the profiler's Poisson sampler (src/profiler/client/sampler.c). */
#include "check.h"
#include "sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static uint64_t g_state = 88172645463325252ull;

static uint64_t rnd(void)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return g_state;
}

/* Allocates `total` bytes in sizes [lo, hi) and returns the reported bytes and samples. */
static double g_expected_events; /* sum over allocations of P(sampled) = 1 - e^(-size/interval) */

static void run(uint64_t interval, size_t lo, size_t hi, uint64_t total, uint64_t *reported,
                uint64_t *samples)
{
    struct hs_sampler_thread t = {0, 0, 0};
    uint64_t done = 0;
    *reported = *samples = 0;
    g_expected_events = 0;
    while (done < total) {
        size_t size = lo + (size_t)(rnd() % (hi - lo));
        g_expected_events += 1.0 - exp(-(double)size / (double)interval);
        size_t r = hs_sampler_sample(&t, interval, size);
        if (r) {
            *reported += r;
            (*samples)++;
        }
        done += size;
    }
}

static void test_unbiased_totals(void)
{
    /* 1 GB of small allocations at 4096: the reported total is within 1% of the truth
     * (the standard error is about 0.2% here). */
    uint64_t reported, samples;
    uint64_t total = 1000000000ull;
    run(4096, 16, 257, total, &reported, &samples);
    double ratio = (double)reported / (double)total;
    printf("interval 4096: reported/true = %.4f, %llu samples\n", ratio,
           (unsigned long long)samples);
    CHECK(ratio > 0.99 && ratio < 1.01);
    /* How many allocations get sampled: each with probability 1 - e^(-size/interval). */
    double events = (double)samples / g_expected_events;
    printf("sampled allocations / expected = %.4f\n", events);
    CHECK(events > 0.98 && events < 1.02);

    run(65536, 1000, 5000, total, &reported, &samples);
    ratio = (double)reported / (double)total;
    CHECK(ratio > 0.98 && ratio < 1.02);
}

static void test_exact_mode(void)
{
    struct hs_sampler_thread t = {0, 0, 0};
    for (size_t size = 1; size < 10000; size += 7)
        CHECK_EQ(hs_sampler_sample(&t, 1, size), size);
}

static void test_large_allocations_are_exact(void)
{
    struct hs_sampler_thread t = {0, 0, 0};
    CHECK_EQ(hs_sampler_sample(&t, 4096, 4096), 4096);
    CHECK_EQ(hs_sampler_sample(&t, 4096, 1000000), 1000000);
    /* They do not move the countdown of small allocations. */
    int64_t before = t.countdown;
    CHECK_EQ(hs_sampler_sample(&t, 4096, 1 << 20), 1 << 20);
    CHECK_EQ(t.countdown, before);
}

static void test_reported_is_a_multiple_of_interval(void)
{
    struct hs_sampler_thread t = {0, 0, 0};
    for (int i = 0; i < 100000; i++) {
        size_t r = hs_sampler_sample(&t, 4096, 4000);
        CHECK(r % 4096 == 0);
    }
}

static void test_draw_distribution(void)
{
    /* Exponential with mean m: mean m, and P(X > m) = 1/e. */
    struct hs_sampler_thread t = {0, 0, 0};
    double sum = 0;
    int above = 0, n = 1000000;
    for (int i = 0; i < n; i++) {
        int64_t x = hs_sampler_draw(&t, 4096);
        CHECK(x >= 1);
        sum += (double)x;
        above += x > 4096;
    }
    double mean = sum / n, tail = (double)above / n;
    printf("draws: mean %.1f, P(X > mean) = %.4f (1/e = %.4f)\n", mean, tail, exp(-1));
    CHECK(mean > 4096 * 0.99 && mean < 4096 * 1.01);
    CHECK(fabs(tail - exp(-1)) < 0.005);
}

static void test_threads_draw_differently(void)
{
    struct hs_sampler_thread a = {0, 0, 0}, b = {0, 0, 0};
    a.rng = 1;
    b.rng = 2;
    CHECK(hs_sampler_draw(&a, 4096) != hs_sampler_draw(&b, 4096));
}

static void test_changing_interval_stays_unbiased(void)
{
    /* Adaptive sampling raises the interval while threads run: here 20000 threads each
     * allocate 256 KiB at 4096, then 1 MiB after the interval went up to 1 MiB. Each sample
     * must weigh the interval its countdown was drawn with: weighing the interval at the time
     * of the sample instead gives each thread's first sample after the raise 1 MiB for what
     * was drawn at 4096 bytes, and the total comes out about 1.8x the truth. */
    uint64_t reported = 0, total = 0;
    for (int thread = 0; thread < 20000; thread++) {
        struct hs_sampler_thread t = {0, 0, 0};
        t.rng = (uint64_t)thread + 1;
        for (int phase = 0; phase < 2; phase++) {
            uint64_t interval = phase == 0 ? 4096 : 1u << 20;
            uint64_t bytes = phase == 0 ? 256u << 10 : 1u << 20, done = 0;
            while (done < bytes) {
                size_t size = 1000 + (size_t)(rnd() % 4000);
                reported += hs_sampler_sample(&t, interval, size);
                done += size;
            }
            total += done;
        }
    }
    double ratio = (double)reported / (double)total;
    printf("interval raised in 20000 threads: reported/true = %.4f\n", ratio);
    CHECK(ratio > 0.97 && ratio < 1.03);
}

int main(void)
{
    test_unbiased_totals();
    test_changing_interval_stays_unbiased();
    test_exact_mode();
    test_large_allocations_are_exact();
    test_reported_is_a_multiple_of_interval();
    test_draw_distribution();
    test_threads_draw_differently();
    return check_report();
}
