/* backtrace_table.c: deduplicated allocation backtraces (see backtrace_table.h).
 *
 * A chained hash table under one spinlock, with atomic reference counts so that dropping a
 * reference (every free) takes no lock: a count that reaches 0 never rises again, lookups
 * skip such a dead record, and the thread that dropped the last reference unlinks it under
 * the lock and frees it.
 * Buckets grow by doubling when the table gets fuller than 1 record per bucket.
 */
#include "backtrace_table.h"

#include "arena.h"
#include "debug_state.h"
#include "spinlock.h"

#include <string.h>

static struct {
    hs_spinlock lock;
    struct hs_md_bt **buckets;
    size_t num_buckets; /* power of two */
    size_t count;
} g_bt = {HS_SPINLOCK_INIT, NULL, 0, 0};

static uint64_t hash_frames(const uintptr_t *frames, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static size_t record_bytes(size_t num_frames)
{
    return sizeof(struct hs_md_bt) + num_frames * sizeof(uintptr_t);
}

/* Doubles the bucket array; called with the lock held. Keeps the old one on failure. */
static void grow(void)
{
    size_t n = g_bt.num_buckets ? g_bt.num_buckets * 2 : 1024;
    struct hs_md_bt **b = hs_arena_calloc(&hs_md_arena, n * sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < g_bt.num_buckets; i++) {
        struct hs_md_bt *r = g_bt.buckets[i];
        while (r) {
            struct hs_md_bt *next = r->next;
            size_t j = r->hash & (n - 1);
            r->next = b[j];
            b[j] = r;
            r = next;
        }
    }
    hs_arena_free(&hs_md_arena, g_bt.buckets, g_bt.num_buckets * sizeof(*b));
    g_bt.buckets = b;
    g_bt.num_buckets = n;
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
    uint64_t h = hash_frames(frames, num_frames);
    hs_spin_lock(&g_bt.lock);
    if (g_bt.count >= g_bt.num_buckets)
        grow();
    if (!g_bt.buckets) {
        hs_spin_unlock(&g_bt.lock);
        return NULL;
    }
    struct hs_md_bt **head = &g_bt.buckets[h & (g_bt.num_buckets - 1)];
    for (struct hs_md_bt *r = *head; r; r = r->next) {
        if (same_frames(r, h, frames, num_frames) && ref_if_alive(r)) {
            hs_spin_unlock(&g_bt.lock);
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
        g_bt.count++;
    }
    hs_spin_unlock(&g_bt.lock);
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
    hs_spin_lock(&g_bt.lock);
    struct hs_md_bt **p = &g_bt.buckets[bt->hash & (g_bt.num_buckets - 1)];
    while (*p != bt)
        p = &(*p)->next;
    *p = bt->next;
    g_bt.count--;
    hs_spin_unlock(&g_bt.lock);
    hs_arena_free(&hs_md_arena, bt, record_bytes(bt->num_frames));
}

size_t hs_md_bt_count(void)
{
    return __atomic_load_n(&g_bt.count, __ATOMIC_RELAXED);
}

void hs_md_bt_lock(void)
{
    hs_spin_lock(&g_bt.lock);
}

void hs_md_bt_unlock(void)
{
    hs_spin_unlock(&g_bt.lock);
}
