/* test_sort.c: unit tests of hs_sort (src/common/sort.c).
 *
 * Every size from 0 to 1000 with random keys, with many duplicates, and with the usual
 * quicksort traps (sorted, reversed, all equal, organ pipe, sawtooth, median-of-three
 * killer); element sizes from 1 to 40 bytes. Each result must be ordered, be a permutation
 * of the input (every element carries its original index and a checksum of its key), and
 * cost O(n log n) comparisons. The comparator's context pointer must reach the comparator.
 */
#include "check.h"
#include "sort.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* A 24-byte element: key, original index, and a value derived from both. */
struct item {
    uint32_t key;
    uint32_t index;
    uint64_t check;
    uint64_t pad;
};

static uint64_t checksum(uint32_t key, uint32_t index)
{
    return ((uint64_t)key * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)index << 1) ^ 0x5555;
}

struct counter {
    unsigned long long calls;
};

static int by_key(const void *a, const void *b, void *ctx)
{
    struct counter *c = ctx;
    if (c)
        c->calls++;
    uint32_t x = ((const struct item *)a)->key, y = ((const struct item *)b)->key;
    return x < y ? -1 : x > y;
}

enum pattern {
    RANDOM,
    FEW_KEYS, /* many duplicates */
    SORTED,
    REVERSED,
    ALL_EQUAL,
    ORGAN_PIPE,
    SAWTOOTH,
    NUM_PATTERNS
};

static const char *pattern_name[] = {"random",    "few_keys",   "sorted",  "reversed",
                                     "all_equal", "organ_pipe", "sawtooth"};

static uint32_t key_for(enum pattern p, size_t i, size_t n)
{
    switch (p) {
    case RANDOM:
        return rng();
    case FEW_KEYS:
        return rng() % 5;
    case SORTED:
        return (uint32_t)i;
    case REVERSED:
        return (uint32_t)(n - i);
    case ALL_EQUAL:
        return 7;
    case ORGAN_PIPE:
        return (uint32_t)(i < n / 2 ? i : n - i);
    case SAWTOOTH:
        return (uint32_t)(i % 17);
    default:
        return 0;
    }
}

static unsigned log2_ceil(size_t n)
{
    unsigned l = 0;
    while (((size_t)1 << l) < n)
        l++;
    return l;
}

/* Sorts one array of n items built by pattern p; returns true when all checks pass. */
static bool run_items(enum pattern p, size_t n)
{
    struct item *a = calloc(n ? n : 1, sizeof(*a));
    unsigned char *seen = calloc(n ? n : 1, 1);
    for (size_t i = 0; i < n; i++) {
        a[i].key = key_for(p, i, n);
        a[i].index = (uint32_t)i;
        a[i].check = checksum(a[i].key, a[i].index);
    }
    struct counter c = {0};
    hs_sort(a, n, sizeof(*a), by_key, &c);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && a[i - 1].key > a[i].key)
            ok = false;
        if (a[i].index >= n || seen[a[i].index] || a[i].check != checksum(a[i].key, a[i].index))
            ok = false;
        else
            seen[a[i].index] = 1;
    }
    /* Introsort bound: a generous constant, but far below n^2 / 4 for n >= 100. */
    unsigned long long bound = 8ull * n * (log2_ceil(n) + 1) + 64;
    if (c.calls > bound)
        ok = false;
    free(a);
    free(seen);
    return ok;
}

static void test_all_sizes_and_patterns(void)
{
    for (int p = 0; p < NUM_PATTERNS; p++) {
        check_context(pattern_name[p]);
        int failures = 0;
        for (size_t n = 0; n <= 1000; n++)
            if (!run_items((enum pattern)p, n))
                failures++;
        CHECK_EQ(failures, 0);
    }
    check_context(NULL);
}

static void test_large(void)
{
    check_context("large");
    for (int p = 0; p < NUM_PATTERNS; p++)
        CHECK(run_items((enum pattern)p, 200000));
    check_context(NULL);
}

/* Median-of-three killer (Musser): forces bad pivots on a naive median-of-three quicksort;
 * introsort must switch to heapsort and stay within the bound. */
static void test_median_of_three_killer(void)
{
    check_context("m3 killer");
    size_t n = 1 << 14;
    struct item *a = calloc(n, sizeof(*a));
    size_t k = n / 2;
    for (size_t i = 1; i <= k; i++) {
        if (i % 2 == 1) {
            a[i - 1].key = (uint32_t)i;
            a[i].key = (uint32_t)(k + i);
        }
        a[k + i - 1].key = (uint32_t)(2 * i);
    }
    for (size_t i = 0; i < n; i++) {
        a[i].index = (uint32_t)i;
        a[i].check = checksum(a[i].key, a[i].index);
    }
    struct counter c = {0};
    hs_sort(a, n, sizeof(*a), by_key, &c);
    bool sorted = true;
    for (size_t i = 1; i < n; i++)
        if (a[i - 1].key > a[i].key)
            sorted = false;
    CHECK(sorted);
    CHECK(c.calls <= 8ull * n * (log2_ceil(n) + 1));
    free(a);
    check_context(NULL);
}

/* McIlroy's adversary ("A Killer Adversary for Quicksort", 1999): the comparator decides
 * the values of the elements as the sort looks at them, so as to make any quicksort go
 * quadratic. Introsort must stay O(n log n) and still produce a sorted result. */
static struct {
    int *val;
    int gas, nsolid, candidate;
    unsigned long long calls;
} adv;

static int adversary(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    int x = *(const int *)a, y = *(const int *)b;
    adv.calls++;
    if (adv.val[x] == adv.gas && adv.val[y] == adv.gas) {
        if (x == adv.candidate)
            adv.val[x] = adv.nsolid++;
        else
            adv.val[y] = adv.nsolid++;
    }
    if (adv.val[x] == adv.gas)
        adv.candidate = x;
    else if (adv.val[y] == adv.gas)
        adv.candidate = y;
    return adv.val[x] < adv.val[y] ? -1 : adv.val[x] > adv.val[y];
}

static void test_adversary(void)
{
    check_context("adversary");
    size_t n = 1 << 15;
    int *ptr = malloc(n * sizeof(int));
    adv.val = malloc(n * sizeof(int));
    adv.gas = (int)n;
    adv.nsolid = 0;
    adv.candidate = 0;
    adv.calls = 0;
    for (size_t i = 0; i < n; i++) {
        ptr[i] = (int)i;
        adv.val[i] = adv.gas;
    }
    hs_sort(ptr, n, sizeof(int), adversary, NULL);
    bool sorted = true;
    for (size_t i = 1; i < n; i++)
        if (adv.val[ptr[i - 1]] > adv.val[ptr[i]])
            sorted = false;
    CHECK(sorted);
    CHECK(adv.calls <= 8ull * n * (log2_ceil(n) + 1));
    free(ptr);
    free(adv.val);
    check_context(NULL);
}

/* Element sizes that are not multiples of 8 (byte-wise swap path) and a tiny one. */
static int by_first_byte(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    return (int)*(const unsigned char *)a - (int)*(const unsigned char *)b;
}

static void test_odd_element_sizes(void)
{
    static const size_t sizes[] = {1, 2, 3, 5, 7, 9, 13, 16, 40};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t size = sizes[s], n = 777;
        unsigned char *a = malloc(n * size);
        unsigned sum_before = 0, sum_after = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char key = (unsigned char)(rng() % 251);
            for (size_t b = 0; b < size; b++)
                a[i * size + b] = (unsigned char)(key + b); /* bytes tied to the key */
            for (size_t b = 0; b < size; b++)
                sum_before += a[i * size + b];
        }
        hs_sort(a, n, size, by_first_byte, NULL);
        bool ok = true;
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && a[(i - 1) * size] > a[i * size])
                ok = false;
            for (size_t b = 0; b < size; b++) {
                if (a[i * size + b] != (unsigned char)(a[i * size] + b))
                    ok = false;
                sum_after += a[i * size + b];
            }
        }
        check_context("odd sizes");
        CHECK(ok);
        CHECK_EQ(sum_before, sum_after);
        free(a);
    }
    check_context(NULL);
}

/* The context pointer reaches the comparator: sort descending through it. */
static int by_direction(const void *a, const void *b, void *ctx)
{
    int dir = *(const int *)ctx;
    int x = *(const int *)a, y = *(const int *)b;
    return dir * (x < y ? -1 : x > y);
}

static void test_context(void)
{
    int v[] = {5, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4};
    size_t n = sizeof(v) / sizeof(v[0]);
    int dir = -1;
    hs_sort(v, n, sizeof(int), by_direction, &dir);
    bool ok = true;
    for (size_t i = 1; i < n; i++)
        if (v[i - 1] < v[i])
            ok = false;
    CHECK(ok);
    CHECK_EQ(v[0], 9);
    CHECK_EQ(v[n - 1], 1);
}

static void test_degenerate(void)
{
    hs_sort(NULL, 0, 8, by_direction, NULL); /* must not touch anything */
    int one = 42, dir = 1;
    hs_sort(&one, 1, sizeof(int), by_direction, &dir);
    CHECK_EQ(one, 42);
    int two[2] = {2, 1};
    hs_sort(two, 2, sizeof(int), by_direction, &dir);
    CHECK(two[0] == 1 && two[1] == 2);
}

int main(void)
{
    test_degenerate();
    test_context();
    test_odd_element_sizes();
    test_all_sizes_and_patterns();
    test_median_of_three_killer();
    test_adversary();
    test_large();
    return check_report();
}
