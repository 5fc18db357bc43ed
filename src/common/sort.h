/* sort.h: an in-place sort that never allocates, for code running inside malloc.
 *
 * glibc's qsort may call malloc (it merge-sorts into a temporary buffer when it can get one),
 * which the malloc shim and signal-time code must never do, so the tools use this instead.
 *
 * Algorithm: introsort. Quicksort with a median-of-three pivot; ranges of 16 elements or fewer
 * are finished by insertion sort; when the recursion gets deeper than 2*log2(n) the range is
 * heapsorted instead, so the worst case is O(n log n) comparisons whatever the input (sorted,
 * reversed, all equal, adversarial). Recursion always goes into the smaller half, so the
 * stack depth is O(log n) (a few hundred bytes per level).
 *
 * Not stable: elements that compare equal may come out in any order. A caller that needs a
 * deterministic order must make its comparator total (e.g. compare addresses last).
 *
 * Elements are moved by swapping bytes in place (no temporary element copy), so any element
 * size works; 8-byte multiples are swapped a word at a time.
 *
 * Threading and signals: no global state; reentrant and async-signal-safe as long as the
 * comparator is.
 */
#ifndef HEAPSCOPE_COMMON_SORT_H
#define HEAPSCOPE_COMMON_SORT_H

#include <stddef.h>

/* Returns <0, 0 or >0 when a sorts before, with, or after b. ctx is hs_sort's ctx. */
typedef int (*hs_sort_cmp_fn)(const void *a, const void *b, void *ctx);

/* Sorts n elements of `size` bytes at base into ascending order of cmp. base may be NULL when
 * n is 0; size must not be 0. */
void hs_sort(void *base, size_t n, size_t size, hs_sort_cmp_fn cmp, void *ctx);

#endif
