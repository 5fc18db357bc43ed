/* backtrace_table.c: deduplicated allocation backtraces (see backtrace_table.h).
 *
 * 16 chained hash tables ("stripes", chosen by the stack's hash), each under its own
 * spinlock so threads allocating from different places rarely meet. Reference counts are
 * atomic so that dropping a reference (every free) takes no lock: a count that reaches 0
 * never rises again, lookups skip such a dead record, and the thread that dropped the last
 * reference unlinks it under its stripe's lock and frees it.
 * A stripe's buckets grow by doubling when it holds more than 1 record per bucket.
 *
 * Per-thread reference cache (on in the shim, hs_md_bt_cache_enable): threads allocating
 * from the same call sites would otherwise all write the same lines on every call, the
 * stripe's lock and the record's count. Each thread keeps the records it used lately in a
 * small direct-mapped cache (by the stack's hash) with a stock of references taken in one
 * atomic add: an acquire that hits takes one from the stock, a release of a record that is
 * in the releasing thread's cache (whichever thread acquired it) puts one back; neither
 * writes a shared line. A record's count is thus the references that allocations hold plus
 * the stocks; a stock always keeps one reference of its own, so a cached record is never
 * freed. A record leaving a cache (replaced, or its thread exiting) gives its stock back.
 * In a forked child the other threads' stocks stay counted: their records are kept (never a
 * wrong report: the pointer table, not the count, says what is live). A signal handler
 * that interrupts a cache operation of its own thread bypasses the cache.
 *
 * A hit costs no hash of the frames: a second, smaller index keyed by the innermost two
 * frames and the depth (a few instructions, hint_key) says which slot held that stack last,
 * and the frames are compared against that slot's record. Only when it does not match (a
 * new stack, or stacks alike in those frames) is the full hash taken, the hash slot used as
 * before and the index pointed at it. The index is a hint only: a stale entry names a slot
 * whose record then fails the comparison.
 */
#include "backtrace_table.h"

#include "arena.h"
#include "debug_state.h"
#include "hash.h"
#include "spinlock.h"

#include <pthread.h>
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

static inline bool same_frames(const struct hs_md_bt *r, uint64_t h, const uintptr_t *frames,
                               size_t n)
{
    if (r->hash != h || r->num_frames != n)
        return false;
    /* A loop, not memcmp: stacks are a few words, and the call would cost more. */
    for (size_t i = 0; i < n; i++)
        if (r->frames[i] != frames[i])
            return false;
    return true;
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

/* The table's acquire (see hs_md_bt_acquire); h is the frames' hash. */
static struct hs_md_bt *table_acquire(const uintptr_t *frames, size_t num_frames, uint64_t h)
{
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

/* Unlinks and frees a record whose count reached 0 (dead for good: no lookup revives it). */
static void free_record(struct hs_md_bt *bt)
{
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

/* Drops n references at once. */
static void drop_refs(struct hs_md_bt *bt, size_t n)
{
    if (__atomic_sub_fetch(&bt->refs, n, __ATOMIC_ACQ_REL) == 0)
        free_record(bt);
}

/* ---- Per-thread reference cache (see the top of this file) ---- */

#define CACHE_SLOTS 64 /* records a thread keeps: call sites it allocates from lately */
#define REF_BATCH 32   /* references a stock takes or gives back in one atomic operation */

struct cached {
    struct hs_md_bt *bt; /* NULL: empty */
    size_t stock;        /* references this cache holds, its own one included (>= 1) */
};

#define HINT_SLOTS 256 /* hint index: slot of the stack last seen with this shim_key */

struct bt_cache {
    struct cached slot[CACHE_SLOTS];
    uint8_t hint[HINT_SLOTS]; /* a slot number; 0 when never set (slot 0: compared anyway) */
};
_Static_assert(CACHE_SLOTS <= 256, "a hint holds a slot number in one byte");
_Static_assert(HINT_SLOTS == 256, "hint_key keeps the top 8 bits of its product");

/* The hint index's key: the innermost two frames and the depth, mixed by one multiply. The
 * index is a hint only (see the top of this file), so a weak key costs a hash, never a
 * wrong record. */
static inline size_t hint_key(const uintptr_t *frames, size_t n)
{
    uint64_t k = frames[0] ^ ((n > 1 ? frames[1] : 0) << 17) ^ n;
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 56); /* HINT_SLOTS == 256 */
}

/* Same stack, without the hash: for a record named by the hint index. */
static inline bool same_frames_nohash(const struct hs_md_bt *r, const uintptr_t *frames, size_t n)
{
    if (r->num_frames != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (r->frames[i] != frames[i])
            return false;
    return true;
}

static bool g_cache_on;
static pthread_key_t g_cache_key;
static __thread struct bt_cache *t_cache __attribute__((tls_model("initial-exec")));
/* Set while this thread is in a cache operation (a signal handler then bypasses it). */
static __thread int t_cache_busy __attribute__((tls_model("initial-exec")));

/* Gives a slot's stock back and empties it. */
static void evict(struct cached *e)
{
    if (e->bt)
        drop_refs(e->bt, e->stock);
    e->bt = NULL;
    e->stock = 0;
}

/* Thread exit (the key's destructor): every stock goes back, the cache to the arena. */
static void cache_exit(void *arg)
{
    struct bt_cache *c = arg;
    t_cache_busy++;
    t_cache = NULL;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        evict(&c->slot[i]);
    hs_arena_free(&hs_md_arena, c, sizeof(*c));
    t_cache_busy--;
}

void hs_md_bt_cache_enable(void)
{
    /* Created at start-up, while key indices are low: setting the value does not allocate. */
    if (pthread_key_create(&g_cache_key, cache_exit) == 0)
        __atomic_store_n(&g_cache_on, true, __ATOMIC_RELEASE);
}

void hs_md_bt_cache_flush(void)
{
    struct bt_cache *c = t_cache;
    if (!c || t_cache_busy)
        return;
    t_cache_busy++;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        evict(&c->slot[i]);
    t_cache_busy--;
}

/* Makes the calling thread's cache (its first use). */
static __attribute__((noinline)) struct bt_cache *cache_make(void)
{
    struct bt_cache *c = hs_arena_calloc(&hs_md_arena, sizeof(*c));
    if (!c)
        return NULL;
    t_cache = c;
    hs_md_in_shim++; /* should setspecific allocate, it goes straight to glibc */
    pthread_setspecific(g_cache_key, c);
    hs_md_in_shim--;
    return c;
}

/* The calling thread's cache, made on first use; NULL when off, busy or out of memory.
 * Inline, the first use out of line: it is on every acquire and release. */
static inline __attribute__((always_inline)) struct bt_cache *cache_enter(void)
{
    /* A thread has a cache only once the cache is on: test that first, the flag after. */
    struct bt_cache *c = t_cache;
    if (__builtin_expect(!c, 0)) {
        if (!__atomic_load_n(&g_cache_on, __ATOMIC_ACQUIRE) || t_cache_busy || !(c = cache_make()))
            return NULL;
    } else if (t_cache_busy) {
        return NULL;
    }
    t_cache_busy++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return c;
}

static inline void cache_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_cache_busy--;
}

struct hs_md_bt *hs_md_bt_acquire(const uintptr_t *frames, size_t num_frames)
{
    if (num_frames == 0)
        return NULL;
    struct bt_cache *c = cache_enter();
    if (!c)
        return table_acquire(frames, num_frames, hs_hash_frames(frames, num_frames));
    uint8_t *hint = &c->hint[hint_key(frames, num_frames)];
    struct cached *e = &c->slot[*hint];
    struct hs_md_bt *r = e->bt;
    if (!r || !same_frames_nohash(r, frames, num_frames)) {
        uint64_t h = hs_hash_frames(frames, num_frames);
        size_t i = h & (CACHE_SLOTS - 1);
        *hint = (uint8_t)i;
        e = &c->slot[i];
        r = e->bt;
        if (!r || !same_frames(r, h, frames, num_frames)) {
            r = table_acquire(frames, num_frames, h);
            if (r) {
                evict(e);
                hs_md_bt_ref(r); /* the cache's own reference */
                e->bt = r;
                e->stock = 1;
            }
            cache_leave();
            return r; /* this reference comes from the table, not from the stock */
        }
    }
    if (e->stock == 1) { /* only the cache's own reference left: take a batch */
        __atomic_add_fetch(&r->refs, REF_BATCH, __ATOMIC_RELAXED);
        e->stock += REF_BATCH;
    }
    e->stock--;
    cache_leave();
    return r;
}

void hs_md_bt_release(struct hs_md_bt *bt)
{
    if (!bt)
        return;
    struct bt_cache *c = cache_enter();
    if (c) {
        struct cached *e = &c->slot[bt->hash & (CACHE_SLOTS - 1)];
        if (e->bt == bt) {
            /* The stock cannot reach 0 from here: the cache's own reference stays. */
            if (++e->stock > 2 * REF_BATCH) {
                __atomic_sub_fetch(&bt->refs, REF_BATCH, __ATOMIC_RELAXED);
                e->stock -= REF_BATCH;
            }
            cache_leave();
            return;
        }
        cache_leave();
    }
    drop_refs(bt, 1);
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
