/* run_order.c: sorting a list made of a few sorted runs, in place (see run_order.h). */
#include "run_order.h"

#include "sort.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* A run of the list: a[src, src + len), to go to a[dst, dst + len) (dst: the lengths of the
 * runs below it in address order). first and last are its lowest and highest begin. */
struct run {
    size_t src, len, dst;
    uintptr_t first, last;
};

/* Whether a[i] begins a new run: it does not follow a[i - 1] in address order, or is in another
 * 64 MiB window. (An ascending piece of one window that goes on in another would span the
 * windows listed elsewhere: malloc debug lists region by region, newest first when it has
 * more than 1024, so the last blocks of one region and the first of an older one, far above
 * it, ascend too.) */
static inline bool run_starts(const struct hs_mu_alloc *a, size_t i)
{
    return a[i].begin <= a[i - 1].begin ||
           (a[i].begin >> HS_MU_RUN_WINDOW_SHIFT) != (a[i - 1].begin >> HS_MU_RUN_WINDOW_SHIFT);
}

static int by_first(const void *pa, const void *pb, void *ctx)
{
    const struct run *runs = ctx;
    uintptr_t a = runs[*(const uint32_t *)pa].first, b = runs[*(const uint32_t *)pb].first;
    return a < b ? -1 : a > b;
}

static void reverse(struct hs_mu_alloc *a, size_t n)
{
    for (size_t i = 0, j = n; i + 1 < j; i++, j--) {
        struct hs_mu_alloc t = a[i];
        a[i] = a[j - 1];
        a[j - 1] = t;
    }
}

/* The heaviest subsequence of runs (by length) whose dst ascend (descend when `down`), in list
 * order: marks them in keep[] and returns their total length. O(k^2): k is small. best[] and
 * prev[] are scratch of k entries. */
static size_t heaviest_in_order(const struct run *runs, size_t k, bool down, size_t *best,
                                uint32_t *prev, bool *keep)
{
    size_t top = 0;
    for (size_t i = 0; i < k; i++) {
        best[i] = runs[i].len;
        prev[i] = UINT32_MAX;
        for (size_t j = 0; j < i; j++) {
            bool ordered = down ? runs[j].dst > runs[i].dst : runs[j].dst < runs[i].dst;
            if (ordered && best[j] + runs[i].len > best[i]) {
                best[i] = best[j] + runs[i].len;
                prev[i] = (uint32_t)j;
            }
        }
        if (best[i] > best[top])
            top = i;
    }
    memset(keep, 0, k * sizeof(*keep));
    for (uint32_t i = (uint32_t)top; i != UINT32_MAX; i = prev[i])
        keep[i] = true;
    return best[top];
}

/* Puts the runs in place: those not kept go through buf; the kept ones, already in the right
 * order relative to one another, are each moved once, straight to their place. A kept run
 * moving down never lands on a kept run not yet moved (they are moved lowest first), nor one
 * moving up (highest first); what they land on otherwise is a run already copied to buf. */
static void place(struct hs_mu_alloc *a, const struct run *runs, size_t k, const bool *keep,
                  struct hs_mu_alloc *buf)
{
    size_t at = 0;
    for (size_t r = 0; r < k; r++) {
        if (!keep[r]) {
            memcpy(buf + at, a + runs[r].src, runs[r].len * sizeof(*a));
            at += runs[r].len;
        }
    }
    for (size_t r = 0; r < k; r++)
        if (keep[r] && runs[r].dst < runs[r].src)
            memmove(a + runs[r].dst, a + runs[r].src, runs[r].len * sizeof(*a));
    for (size_t r = k; r-- > 0;)
        if (keep[r] && runs[r].dst > runs[r].src)
            memmove(a + runs[r].dst, a + runs[r].src, runs[r].len * sizeof(*a));
    at = 0;
    for (size_t r = 0; r < k; r++) {
        if (!keep[r]) {
            memcpy(a + runs[r].dst, buf + at, runs[r].len * sizeof(*a));
            at += runs[r].len;
        }
    }
}

int hs_mu_order_runs(struct hs_mu_alloc *a, size_t n, struct hs_arena *arena)
{
    if (n < 2)
        return 1;
    /* The runs, found in one pass (room for the most taken: 40 KiB). */
    size_t runs_bytes = HS_MU_MAX_RUNS * sizeof(struct run);
    struct run *runs = hs_arena_alloc(arena, runs_bytes);
    if (!runs)
        return -ENOMEM;
    size_t k = 0;
    runs[0] = (struct run){0, 0, 0, a[0].begin, a[0].begin};
    for (size_t i = 1; i < n; i++) {
        if (__builtin_expect(run_starts(a, i), 0)) {
            runs[k].len = i - runs[k].src;
            runs[k].last = a[i - 1].begin;
            if (++k == HS_MU_MAX_RUNS) {
                hs_arena_free(arena, runs, runs_bytes);
                return 0;
            }
            runs[k] = (struct run){i, 0, 0, a[i].begin, a[i].begin};
        }
    }
    runs[k].len = n - runs[k].src;
    runs[k].last = a[n - 1].begin;
    if (++k == 1) {
        hs_arena_free(arena, runs, runs_bytes);
        return 1;
    }

    size_t order_bytes = k * sizeof(uint32_t);
    size_t best_bytes = k * sizeof(size_t), keep_bytes = 2 * k * sizeof(bool);
    uint32_t *order = hs_arena_alloc(arena, order_bytes);
    size_t *best = hs_arena_alloc(arena, best_bytes);
    bool *keep = hs_arena_alloc(arena, keep_bytes);
    struct hs_mu_alloc *buf = NULL;
    size_t buf_bytes = 0;
    int result = -ENOMEM;
    if (!order || !best || !keep)
        goto done;

    /* The runs in address order, which must not interleave, give each its place. */
    for (uint32_t i = 0; i < k; i++)
        order[i] = i;
    hs_sort(order, k, sizeof(*order), by_first, runs);
    size_t at = 0;
    for (size_t i = 0; i < k; i++) {
        struct run *x = &runs[order[i]];
        if (i > 0 && runs[order[i - 1]].last >= x->first) {
            result = 0;
            goto done;
        }
        x->dst = at;
        at += x->len;
    }

    /* Keep the heaviest runs already in order, or in reverse order (malloc debug's regions,
     * newest first, on a heap that grew upwards): the whole list is then reversed, and each
     * run, so that those come in order. Whatever else is moved goes through a buffer, which
     * must stay smaller than the list (else the general sort, with a copy of the list, is no
     * worse). */
    bool *keep_up = keep, *keep_down = keep + k;
    size_t up = heaviest_in_order(runs, k, false, best, order, keep_up);
    size_t down = heaviest_in_order(runs, k, true, best, order, keep_down);
    bool reversed = down > up;
    size_t rest = n - (reversed ? down : up);
    if (rest > n / 2) {
        result = 0;
        goto done;
    }
    if (reversed) {
        reverse(a, n);
        /* The runs, in their new list order (each reversed back to ascending). */
        for (size_t i = 0; i < k / 2; i++) {
            struct run t = runs[i];
            runs[i] = runs[k - 1 - i];
            runs[k - 1 - i] = t;
            bool kt = keep_down[i];
            keep_down[i] = keep_down[k - 1 - i];
            keep_down[k - 1 - i] = kt;
        }
        for (size_t i = 0; i < k; i++) {
            runs[i].src = n - runs[i].src - runs[i].len;
            reverse(a + runs[i].src, runs[i].len);
        }
    }
    if (rest) {
        buf_bytes = rest * sizeof(*buf);
        buf = hs_arena_alloc(arena, buf_bytes);
        if (!buf) {
            if (reversed) /* back as it was */
                for (size_t i = 0; i < k; i++)
                    reverse(a + runs[i].src, runs[i].len);
            if (reversed)
                reverse(a, n);
            goto done;
        }
    }
    place(a, runs, k, reversed ? keep_down : keep_up, buf);
    result = 1;
done:
    hs_arena_free(arena, buf, buf_bytes);
    hs_arena_free(arena, keep, keep_bytes);
    hs_arena_free(arena, best, best_bytes);
    hs_arena_free(arena, order, order_bytes);
    hs_arena_free(arena, runs, runs_bytes);
    return result;
}
