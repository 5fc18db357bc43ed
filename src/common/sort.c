/* sort.c: allocation-free introsort (see sort.h). */
#include "sort.h"

#include <stdint.h>
#include <string.h>

/* Ranges this small are finished by insertion sort. */
#define INSERTION_MAX 16

struct sorter {
    char *base;
    size_t size;
    hs_sort_cmp_fn cmp;
    void *ctx;
};

static inline char *at(const struct sorter *s, size_t i)
{
    return s->base + i * s->size;
}

static inline int cmp_at(const struct sorter *s, size_t i, size_t j)
{
    return s->cmp(at(s, i), at(s, j), s->ctx);
}

static void swap_bytes(char *a, char *b, size_t size)
{
    if (a == b)
        return;
    for (; size >= sizeof(uint64_t); size -= sizeof(uint64_t)) {
        uint64_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        memcpy(a, &y, sizeof(y));
        memcpy(b, &x, sizeof(x));
        a += sizeof(uint64_t);
        b += sizeof(uint64_t);
    }
    for (; size > 0; size--, a++, b++) {
        char t = *a;
        *a = *b;
        *b = t;
    }
}

static inline void swap_at(const struct sorter *s, size_t i, size_t j)
{
    swap_bytes(at(s, i), at(s, j), s->size);
}

/* Insertion sort of [lo, hi) by adjacent swaps (no temporary element). */
static void insertion_sort(const struct sorter *s, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++)
        for (size_t j = i; j > lo && cmp_at(s, j - 1, j) > 0; j--)
            swap_at(s, j - 1, j);
}

/* Restores the max-heap property of the heap at [lo, lo + n) below node `root` (0-based). */
static void sift_down(const struct sorter *s, size_t lo, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && cmp_at(s, lo + child, lo + child + 1) < 0)
            child++;
        if (cmp_at(s, lo + root, lo + child) >= 0)
            return;
        swap_at(s, lo + root, lo + child);
        root = child;
    }
}

static void heap_sort(const struct sorter *s, size_t lo, size_t hi)
{
    size_t n = hi - lo;
    if (n < 2)
        return;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(s, lo, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        swap_at(s, lo, lo + end);
        sift_down(s, lo, 0, end);
    }
}

/* Puts the median of elements lo, mid and hi - 1 at lo (the pivot). */
static void median_to_front(const struct sorter *s, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2, last = hi - 1;
    /* Order lo <= mid <= last, then move mid to lo. */
    if (cmp_at(s, mid, lo) < 0)
        swap_at(s, mid, lo);
    if (cmp_at(s, last, mid) < 0) {
        swap_at(s, last, mid);
        if (cmp_at(s, mid, lo) < 0)
            swap_at(s, mid, lo);
    }
    swap_at(s, lo, mid);
}

/* Partitions [lo, hi) (hi - lo >= 2) around the pivot at lo; returns the pivot's final index p:
 * everything before p compares <= the pivot, everything after >= it. Scans stop on elements
 * equal to the pivot, so runs of equal keys split evenly instead of degrading to O(n^2). */
static size_t partition(const struct sorter *s, size_t lo, size_t hi)
{
    size_t i = lo + 1, j = hi - 1;
    for (;;) {
        while (i <= j && cmp_at(s, i, lo) < 0)
            i++;
        while (i <= j && cmp_at(s, j, lo) > 0)
            j--;
        if (i >= j)
            break;
        swap_at(s, i, j);
        i++;
        j--;
    }
    swap_at(s, lo, j);
    return j;
}

static void intro_sort(const struct sorter *s, size_t lo, size_t hi, unsigned depth)
{
    while (hi - lo > INSERTION_MAX) {
        if (depth == 0) {
            heap_sort(s, lo, hi);
            return;
        }
        depth--;
        median_to_front(s, lo, hi);
        size_t p = partition(s, lo, hi);
        /* Recurse into the smaller side, loop on the larger. */
        if (p - lo < hi - (p + 1)) {
            intro_sort(s, lo, p, depth);
            lo = p + 1;
        } else {
            intro_sort(s, p + 1, hi, depth);
            hi = p;
        }
    }
    insertion_sort(s, lo, hi);
}

void hs_sort(void *base, size_t n, size_t size, hs_sort_cmp_fn cmp, void *ctx)
{
    if (n < 2 || size == 0)
        return;
    struct sorter s = {base, size, cmp, ctx};
    unsigned depth = 0;
    for (size_t m = n; m > 1; m >>= 1)
        depth += 2;
    intro_sort(&s, 0, n, depth);
}
