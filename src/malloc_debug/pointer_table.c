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
 * probing and backward-shift deletion (no tombstones), kept at most 50% full.
 *
 * Compact keys: a slot of the probed array is 8 bytes, the pointer (48 bits) and, for an
 * entry without a backtrace whose size fits 15 bits, the size (bits 48-62): all that
 * leak_track, verify_pointers and free_track need for most blocks. Other entries (a
 * backtrace, a size of 32 KiB or more, a pointer above 2^48) set bit 63 and keep pointer,
 * size and backtrace in a parallel array, read only for them. So the lines a lookup touches
 * are 8 bytes a slot, a table of a few thousand live blocks stays in the core's cache, and
 * an add or remove costs one uncontended spinlock round trip and, at 50% load, about 1.5
 * probes of that array. Slots store the encoding inverted (~), so an empty slot is 0 (never
 * an encoding) and no slot looks like a pointer to a conservative scanner (the
 * unreachable-memory detector reads the table): a plain entry has bit 63 set, one with an
 * aux slot bits 48-62, and the aux slot keeps ~pointer as well.
 */
#include "pointer_table.h"

#include "arena.h"
#include "debug_state.h"
#include "spinlock.h"

#include <string.h>

#define SHARDS 64
#define MIN_CAPACITY 64

#define PTR_MASK ((UINT64_C(1) << 48) - 1)
#define SIZE_SHIFT 48
#define INLINE_SIZE_MAX ((UINT64_C(1) << 15) - 1)
#define HAS_AUX (UINT64_C(1) << 63)

/* What an entry with HAS_AUX keeps beside its key. */
struct aux {
    uintptr_t ptr_code; /* ~pointer: like the keys, no pointer for a conservative scanner */
    size_t size;
    struct hs_md_bt *bt;
};

struct shard {
    hs_spinlock lock;
    uint64_t *keys;  /* capacity slots, each ~encoding or 0 (empty); guarded by lock */
    struct aux *aux; /* parallel to keys, valid where the key has HAS_AUX; made with the
                      * first such entry (NULL until then) */
    size_t capacity; /* power of two, or 0 */
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

/* The encoding (not inverted) of an entry that needs no aux slot, or 0 when it needs one. */
static inline uint64_t plain_code(uintptr_t p, const struct hs_md_ptr_info *info)
{
    if (info->bt || info->size > INLINE_SIZE_MAX || (uint64_t)p > PTR_MASK)
        return 0;
    return (uint64_t)p | ((uint64_t)info->size << SIZE_SHIFT);
}

/* The pointer of the entry in slot i (occupied). */
static inline uintptr_t slot_ptr(const struct shard *s, size_t i)
{
    uint64_t code = ~s->keys[i];
    return (code & HAS_AUX) ? ~s->aux[i].ptr_code : (uintptr_t)(code & PTR_MASK);
}

/* True when slot i (occupied) holds p. */
static inline bool slot_is(const struct shard *s, size_t i, uintptr_t p)
{
    uint64_t code = ~s->keys[i];
    if ((code & PTR_MASK) != ((uint64_t)p & PTR_MASK))
        return false;
    return (code & HAS_AUX) ? ~s->aux[i].ptr_code == p : (uint64_t)p <= PTR_MASK;
}

static inline void slot_info(const struct shard *s, size_t i, struct hs_md_ptr_info *out)
{
    uint64_t code = ~s->keys[i];
    if (code & HAS_AUX) {
        out->size = s->aux[i].size;
        out->bt = s->aux[i].bt;
    } else {
        out->size = (size_t)((code & ~HAS_AUX) >> SIZE_SHIFT);
        out->bt = NULL;
    }
}

/* Stores the entry (p, info) in slot i. */
static inline void slot_set(struct shard *s, size_t i, uintptr_t p,
                            const struct hs_md_ptr_info *info)
{
    uint64_t code = plain_code(p, info);
    if (!code) {
        code = HAS_AUX | ((uint64_t)p & PTR_MASK);
        s->aux[i] = (struct aux){~p, info->size, info->bt};
    }
    s->keys[i] = ~code;
}

static inline void slot_move(struct shard *s, size_t to, size_t from)
{
    s->keys[to] = s->keys[from];
    if (~s->keys[from] & HAS_AUX)
        s->aux[to] = s->aux[from];
}

/* Gives the shard its aux array. */
static bool make_aux(struct shard *s)
{
    s->aux = hs_arena_alloc(&hs_md_arena, s->capacity * sizeof(*s->aux));
    return s->aux != NULL;
}

static bool grow(struct shard *s)
{
    size_t capacity = s->capacity ? s->capacity * 2 : MIN_CAPACITY;
    uint64_t *keys = hs_arena_calloc(&hs_md_arena, capacity * sizeof(*keys));
    struct aux *aux = NULL;
    if (keys && s->aux)
        aux = hs_arena_alloc(&hs_md_arena, capacity * sizeof(*aux));
    if (!keys || (s->aux && !aux)) {
        if (keys)
            hs_arena_free(&hs_md_arena, keys, capacity * sizeof(*keys));
        return false;
    }
    struct shard old = *s;
    s->keys = keys;
    s->aux = aux;
    s->capacity = capacity;
    for (size_t i = 0; i < old.capacity; i++) {
        if (!old.keys[i])
            continue;
        uintptr_t p = slot_ptr(&old, i);
        size_t j = home_slot(s, mix(p));
        while (s->keys[j] != 0)
            j = (j + 1) & (capacity - 1);
        s->keys[j] = old.keys[i];
        if (~old.keys[i] & HAS_AUX)
            s->aux[j] = old.aux[i];
    }
    hs_arena_free(&hs_md_arena, old.keys, old.capacity * sizeof(*keys));
    if (old.aux)
        hs_arena_free(&hs_md_arena, old.aux, old.capacity * sizeof(*aux));
    return true;
}

/* Returns the slot index of p, or SIZE_MAX. Lock held. */
static size_t lookup(const struct shard *s, uintptr_t p, uint64_t h)
{
    if (s->capacity == 0)
        return SIZE_MAX;
    for (size_t i = home_slot(s, h);; i = (i + 1) & (s->capacity - 1)) {
        if (s->keys[i] == 0)
            return SIZE_MAX;
        if (slot_is(s, i, p))
            return i;
    }
}

/* Removes slot i, shifting later entries of the probe run back into the hole. */
static void erase(struct shard *s, size_t i)
{
    size_t mask = s->capacity - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = home_slot(s, mix(slot_ptr(s, j)));
        /* Move j into the hole if its home is not cyclically within (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            slot_move(s, hole, j);
            hole = j;
        }
    }
    s->keys[hole] = 0;
    s->count--;
}

bool hs_md_ptr_add(const void *ptr, const struct hs_md_ptr_info *info)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = mix(p);
    struct shard *s = shard_of(p);
    hs_spin_lock(&s->lock);
    if (((s->count + 1) * 2 > s->capacity && !grow(s)) ||
        (!s->aux && !plain_code(p, info) && !make_aux(s))) {
        hs_spin_unlock(&s->lock);
        return false;
    }
    /* One probe run finds either the key (glibc handed out a live pointer twice, which
     * cannot happen unless the heap is corrupt: keep the newer entry) or a free slot. */
    size_t i = home_slot(s, h);
    while (s->keys[i] != 0 && !slot_is(s, i, p))
        i = (i + 1) & (s->capacity - 1);
    struct hs_md_bt *old = NULL;
    if (s->keys[i]) {
        struct hs_md_ptr_info prev;
        slot_info(s, i, &prev);
        old = prev.bt;
    } else {
        s->count++;
    }
    slot_set(s, i, p, info);
    if (s->count > s->peak)
        s->peak = s->count;
    hs_spin_unlock(&s->lock);
    hs_md_bt_release(old);
    return true;
}

bool hs_md_ptr_remove(const void *ptr, struct hs_md_ptr_info *out)
{
    uintptr_t p = (uintptr_t)ptr;
    struct shard *s = shard_of(p);
    hs_spin_lock(&s->lock);
    size_t i = lookup(s, p, mix(p));
    if (i == SIZE_MAX) {
        hs_spin_unlock(&s->lock);
        return false;
    }
    slot_info(s, i, out);
    erase(s, i);
    hs_spin_unlock(&s->lock);
    return true;
}

static bool find(const void *ptr, struct hs_md_ptr_info *out, bool ref)
{
    uintptr_t p = (uintptr_t)ptr;
    struct shard *s = shard_of(p);
    hs_spin_lock(&s->lock);
    size_t i = lookup(s, p, mix(p));
    if (i != SIZE_MAX && out) {
        slot_info(s, i, out);
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
    for (int i = 0; i < SHARDS; i++)
        hs_spin_lock(&g_shards[i].lock);
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
            if (s->keys[j]) {
                struct hs_md_ptr_info info;
                slot_info(s, j, &info);
                fn(slot_ptr(s, j), &info, arg);
            }
        }
    }
}
