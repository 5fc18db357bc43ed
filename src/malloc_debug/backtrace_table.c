/* backtrace_table.c: deduplicated allocation backtraces (see backtrace_table.h).
 *
 * 16 chained hash tables ("stripes", chosen by the stack's hash), each under its own
 * spinlock so threads allocating from different places rarely meet. Reference counts are
 * atomic so that dropping a reference (every free) takes no lock: a count that reaches 0
 * never rises again, lookups skip such a dead record, and the thread that dropped the last
 * reference unlinks it under its stripe's lock and frees it.
 * A stripe's buckets grow by doubling when it holds more than 1 record per bucket.
 */
#include "backtrace_table.h"

#include "arena.h"
#include "debug_state.h"
#include "hash.h"
#include "spinlock.h"

#include <string.h>

#define STRIPES 16

struct stripe {
    hs_spinlock lock;
    struct hs_md_bt **buckets; /* guarded by lock */
    size_t num_buckets;        /* power of two, or 0 */
    size_t count;
} __attribute__((aligned(64)));

static struct stripe g_stripes[STRIPES];

static struct stripe *stripe_of(uint64_t h)
{
    return &g_stripes[h >> 60]; /* top 4 bits: STRIPES == 16; buckets use the low bits */
}

static size_t record_bytes(size_t num_frames)
{
    return sizeof(struct hs_md_bt) + num_frames * sizeof(uintptr_t);
}

/* Doubles the bucket array; called with the stripe's lock held. Keeps the old one on
 * failure. */
static void grow(struct stripe *g)
{
    size_t n = g->num_buckets ? g->num_buckets * 2 : 64;
    struct hs_md_bt **b = hs_arena_calloc(&hs_md_arena, n * sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < g->num_buckets; i++) {
        struct hs_md_bt *r = g->buckets[i];
        while (r) {
            struct hs_md_bt *next = r->next;
            size_t j = r->hash & (n - 1);
            r->next = b[j];
            b[j] = r;
            r = next;
        }
    }
    hs_arena_free(&hs_md_arena, g->buckets, g->num_buckets * sizeof(*b));
    g->buckets = b;
    g->num_buckets = n;
}

static bool same_frames(const struct hs_md_bt *r, uint64_t h, const uintptr_t *frames, size_t n)
{
    return r->hash == h && r->num_frames == n &&
           memcmp(r->frames, frames, n * sizeof(uintptr_t)) == 0;
}

/* Takes a reference unless the record is already dead (count 0). */
static bool ref_if_alive(struct hs_md_bt *r)
{
    size_t refs = __atomic_load_n(&r->refs, __ATOMIC_RELAXED);
    while (refs != 0)
        if (__atomic_compare_exchange_n(&r->refs, &refs, refs + 1, true, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return true;
    return false;
}

struct hs_md_bt *hs_md_bt_acquire(const uintptr_t *frames, size_t num_frames)
{
    if (num_frames == 0)
        return NULL;
    uint64_t h = hs_hash_frames(frames, num_frames);
    struct stripe *g = stripe_of(h);
    hs_spin_lock(&g->lock);
    if (g->count >= g->num_buckets)
        grow(g);
    if (!g->buckets) {
        hs_spin_unlock(&g->lock);
        return NULL;
    }
    struct hs_md_bt **head = &g->buckets[h & (g->num_buckets - 1)];
    for (struct hs_md_bt *r = *head; r; r = r->next) {
        if (same_frames(r, h, frames, num_frames) && ref_if_alive(r)) {
            hs_spin_unlock(&g->lock);
            return r;
        }
    }
    struct hs_md_bt *r = hs_arena_alloc(&hs_md_arena, record_bytes(num_frames));
    if (r) {
        r->hash = h;
        r->refs = 1;
        r->num_frames = (uint32_t)num_frames;
        memcpy(r->frames, frames, num_frames * sizeof(uintptr_t));
        r->next = *head;
        *head = r;
        g->count++;
    }
    hs_spin_unlock(&g->lock);
    return r;
}

void hs_md_bt_ref(struct hs_md_bt *bt)
{
    if (bt)
        __atomic_add_fetch(&bt->refs, 1, __ATOMIC_RELAXED);
}

void hs_md_bt_release(struct hs_md_bt *bt)
{
    if (!bt || __atomic_sub_fetch(&bt->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    /* Dead for good: no lookup revives a record at 0. Unlink it and free it. */
    struct stripe *g = stripe_of(bt->hash);
    hs_spin_lock(&g->lock);
    struct hs_md_bt **p = &g->buckets[bt->hash & (g->num_buckets - 1)];
    while (*p != bt)
        p = &(*p)->next;
    *p = bt->next;
    g->count--;
    hs_spin_unlock(&g->lock);
    hs_arena_free(&hs_md_arena, bt, record_bytes(bt->num_frames));
}

size_t hs_md_bt_count(void)
{
    size_t n = 0;
    for (int i = 0; i < STRIPES; i++)
        n += __atomic_load_n(&g_stripes[i].count, __ATOMIC_RELAXED);
    return n;
}

void hs_md_bt_lock(void)
{
    for (int i = 0; i < STRIPES; i++)
        hs_spin_lock(&g_stripes[i].lock);
}

void hs_md_bt_unlock(void)
{
    for (int i = STRIPES - 1; i >= 0; i--)
        hs_spin_unlock(&g_stripes[i].lock);
}
