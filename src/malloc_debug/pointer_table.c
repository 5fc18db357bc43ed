/* pointer_table.c: sharded live-allocation table (see pointer_table.h).
 *
 * 64 shards chosen by a hash of the pointer's 64 MiB region. glibc gives every arena heaps
 * of its own, 64 MiB each and 64 MiB-aligned (HEAP_MAX_SIZE), and a thread allocates from
 * the arena it is attached to: so the blocks of one thread fall in shards that other
 * threads rarely touch, and an add or remove writes only cache lines (the shard's lock, its
 * slots) that stay in its own core's cache. A block freed by another thread is found all the
 * same: the shard depends on the address alone. (Hashing the whole pointer instead spread
 * every thread over every shard: each call then wrote lines last written by another core.)
 * Each shard is an open-addressing table with linear
 * probing and backward-shift deletion (no tombstones), kept at most 50% full. An empty slot
 * has key 0; keys are ~pointer, which is never 0 for a real pointer.
 * Cost of an add or remove: one spinlock round trip and, at 50% load, about 1.5 probes.
 */
#include "pointer_table.h"

#include "arena.h"
#include "debug_state.h"
#include "hs_assert.h"
#include "spinlock.h"

#include <string.h>

#define SHARDS 64
#define MIN_CAPACITY 64

struct entry {
    uintptr_t key; /* ~pointer; 0 = empty */
    size_t size;
    struct hs_md_bt *bt;
};

struct shard {
    hs_spinlock lock;
    struct entry *slots; /* guarded by lock */
    size_t capacity;     /* power of two, or 0 */
    size_t count;
    size_t peak; /* highest count so far */
} __attribute__((aligned(64)));

static struct shard g_shards[SHARDS];

static inline uint64_t mix(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

#define REGION_SHIFT 26 /* 64 MiB: glibc's HEAP_MAX_SIZE on 64-bit */

static inline struct shard *shard_of(uintptr_t p)
{
    return &g_shards[mix(p >> REGION_SHIFT) >> 58]; /* top 6 bits: SHARDS == 64 */
}

static inline size_t home_slot(const struct shard *s, uint64_t h)
{
    return (size_t)h & (s->capacity - 1);
}

/* Inserts without growing; the key must be absent and a free slot must exist. */
static void put(struct shard *s, uintptr_t key, size_t size, struct hs_md_bt *bt)
{
    hs_assert(key != 0 && s->count < s->capacity);
    size_t i = home_slot(s, mix(~key));
    while (s->slots[i].key != 0) {
        hs_assert(s->slots[i].key != key);
        i = (i + 1) & (s->capacity - 1);
    }
    s->slots[i] = (struct entry){key, size, bt};
    s->count++;
}

#if HS_ASSERT_EXPENSIVE
/* Level-2 check of a whole shard: every key is reached from its home slot without crossing an
 * empty slot (what lookup and erase rely on), and count is the number of keys. */
static void check_shard(const struct shard *s)
{
    size_t mask = s->capacity - 1, n = 0;
    for (size_t i = 0; i < s->capacity; i++) {
        if (s->slots[i].key == 0)
            continue;
        n++;
        for (size_t j = home_slot(s, mix(~s->slots[i].key)); j != i; j = (j + 1) & mask)
            hs_assert_expensive(s->slots[j].key != 0);
    }
    hs_assert_expensive(n == s->count);
}
#endif

static bool grow(struct shard *s)
{
    size_t capacity = s->capacity ? s->capacity * 2 : MIN_CAPACITY;
    struct entry *slots = hs_arena_calloc(&hs_md_arena, capacity * sizeof(struct entry));
    if (!slots)
        return false;
    struct entry *old = s->slots;
    size_t old_capacity = s->capacity;
    s->slots = slots;
    s->capacity = capacity;
    s->count = 0;
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i].key)
            put(s, old[i].key, old[i].size, old[i].bt);
    hs_arena_free(&hs_md_arena, old, old_capacity * sizeof(struct entry));
#if HS_ASSERT_EXPENSIVE
    check_shard(s);
#endif
    return true;
}

/* Returns the slot index of key, or SIZE_MAX. Lock held. */
static size_t lookup(const struct shard *s, uintptr_t key, uint64_t h)
{
    if (s->capacity == 0)
        return SIZE_MAX;
    for (size_t i = home_slot(s, h);; i = (i + 1) & (s->capacity - 1)) {
        if (s->slots[i].key == key)
            return i;
        if (s->slots[i].key == 0)
            return SIZE_MAX;
    }
}

/* Removes slot i, shifting later entries of the probe run back into the hole. */
static void erase(struct shard *s, size_t i)
{
    hs_assert(i < s->capacity && s->slots[i].key != 0 && s->count > 0);
    size_t mask = s->capacity - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j].key != 0; j = (j + 1) & mask) {
        size_t home = home_slot(s, mix(~s->slots[j].key));
        /* Move j into the hole if its home is not cyclically within (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole].key = 0;
    s->count--;
}

bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info)
{
    uintptr_t key = ~(uintptr_t)ptr;
    uint64_t h = mix((uintptr_t)ptr);
    struct shard *s = shard_of((uintptr_t)ptr);
    hs_spin_lock(&s->lock);
    if ((s->count + 1) * 2 > s->capacity && !grow(s)) {
        hs_spin_unlock(&s->lock);
        return false;
    }
    /* One probe run finds either the key (glibc handed out a live pointer twice, which
     * cannot happen unless the heap is corrupt: keep the newer entry) or a free slot. */
    size_t i = home_slot(s, h);
    while (s->slots[i].key != 0 && s->slots[i].key != key)
        i = (i + 1) & (s->capacity - 1);
    struct hs_md_bt *old = s->slots[i].key ? s->slots[i].bt : NULL;
    if (!s->slots[i].key)
        s->count++;
    s->slots[i] = (struct entry){key, info->size, info->bt};
    if (s->count > s->peak)
        s->peak = s->count;
    hs_spin_unlock(&s->lock);
    if (__builtin_expect(old != NULL, 0)) /* a live pointer handed out twice (see above) */
        hs_md_bt_release(old);
    return true;
}

bool hs_md_ptr_restore(const void *ptr, const struct hs_md_ptr_info *info)
{
    uintptr_t key = ~(uintptr_t)ptr;
    struct shard *s = shard_of((uintptr_t)ptr);
    hs_spin_lock(&s->lock);
    /* One empty slot must remain after the insertion, or probes would not end. The key is
     * absent: its block is live and was taken out by the caller (put checks it). */
    bool room = s->count + 2 <= s->capacity;
    if (room) {
        put(s, key, info->size, info->bt);
        if (s->count > s->peak)
            s->peak = s->count;
    }
    hs_spin_unlock(&s->lock);
    return room;
}

bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out)
{
    uintptr_t key = ~(uintptr_t)ptr;
    uint64_t h = mix((uintptr_t)ptr);
    struct shard *s = shard_of((uintptr_t)ptr);
    hs_spin_lock(&s->lock);
    size_t i = lookup(s, key, h);
    if (i == SIZE_MAX) {
        hs_spin_unlock(&s->lock);
        return false;
    }
    out->size = s->slots[i].size;
    out->bt = s->slots[i].bt;
    erase(s, i);
    hs_spin_unlock(&s->lock);
    return true;
}

static bool find(const void *ptr, struct hs_md_ptr_info *out, bool ref)
{
    uintptr_t key = ~(uintptr_t)ptr;
    uint64_t h = mix((uintptr_t)ptr);
    struct shard *s = shard_of((uintptr_t)ptr);
    hs_spin_lock(&s->lock);
    size_t i = lookup(s, key, h);
    if (i != SIZE_MAX && out) {
        out->size = s->slots[i].size;
        out->bt = s->slots[i].bt;
        if (ref)
            hs_md_bt_ref(out->bt); /* lock order: shard, then backtrace table */
    }
    hs_spin_unlock(&s->lock);
    return i != SIZE_MAX;
}

bool hs_md_ptr_find(const void *ptr, struct hs_md_ptr_info *out)
{
    return find(ptr, out, false);
}

bool hs_md_ptr_find_ref(const void *ptr, struct hs_md_ptr_info *out)
{
    return find(ptr, out, true);
}

size_t hs_md_ptr_count(void)
{
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++)
        n += __atomic_load_n(&g_shards[i].count, __ATOMIC_RELAXED);
    return n;
}

size_t hs_md_ptr_peak(void)
{
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++)
        n += __atomic_load_n(&g_shards[i].peak, __ATOMIC_RELAXED);
    return n;
}

void hs_md_ptr_lock_all(void)
{
    for (int i = 0; i < SHARDS; i++) {
        hs_spin_lock(&g_shards[i].lock);
#if HS_ASSERT_EXPENSIVE
        check_shard(&g_shards[i]);
#endif
    }
}

void hs_md_ptr_unlock_all(void)
{
    for (int i = SHARDS - 1; i >= 0; i--)
        hs_spin_unlock(&g_shards[i].lock);
}

void hs_md_ptr_foreach_locked(void (*fn)(uintptr_t ptr, const struct hs_md_ptr_info *info,
                                         void *arg),
                              void *arg)
{
    for (int i = 0; i < SHARDS; i++) {
        const struct shard *s = &g_shards[i];
        for (size_t j = 0; j < s->capacity; j++) {
            if (s->slots[j].key) {
                struct hs_md_ptr_info info = {s->slots[j].size, s->slots[j].bt};
                fn(~s->slots[j].key, &info, arg);
            }
        }
    }
}

size_t hs_md_ptr_list_locked(uintptr_t (*out)[2], size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++) {
        const struct entry *e = g_shards[i].slots, *end = e + g_shards[i].capacity;
        for (; e < end; e++) {
            if (!e->key)
                continue;
            if (n < cap) {
                out[n][0] = ~e->key;
                out[n][1] = e->size;
            }
            n++;
        }
    }
    return n;
}
