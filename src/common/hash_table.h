/* hash_table.h: the tools' one open-addressing hash table, generated per entry type.
 *
 * HS_HASH_TABLE_DEFINE(P, entry_t, key_t, key_hash, entry_hash, entry_matches, entry_is_empty,
 * entry_clear) defines `struct P` and static inline functions P_init, P_destroy, P_find,
 * P_find_or_insert, P_reserve, P_put, P_erase, P_remove, P_next, P_clear, P_check, P_slot_of.
 * entry_t and key_t must each be one type name (typedef a pointer type first: "const entry_t *"
 * must mean a pointer to a const entry). The entry type is stored in the slots themselves: a struct
 * with its key and value, or a 32-bit index into the caller's own array (keys compared through the
 * table's ctx).
 *
 * The caller supplies, as functions or macros (ctx is the pointer given to P_init):
 *   uint64_t key_hash(const key_t *k, const void *ctx)        the key's hash;
 *   uint64_t entry_hash(const entry_t *e, const void *ctx)    the hash of a stored entry's key,
 *                                                             equal to key_hash of that key;
 *   bool entry_matches(const entry_t *e, const key_t *k, const void *ctx);
 *   bool entry_is_empty(const entry_t *e)                     a slot holding no entry;
 *   void entry_clear(entry_t *e)                              makes a slot empty.
 * The hash need not be well mixed in its low bits: a slot is the top bits of hash * 2^64/phi
 * (Fibonacci hashing), so a pointer or a small integer can be its own hash.
 *
 * Algorithm: a power-of-two array of slots, linear probing, no tombstones. Deletion shifts
 * back each following entry of the probe run that may move to the freed slot (backward-shift
 * deletion, Knuth 6.4 algorithm R), so a lookup ends at the first empty slot. The table grows
 * (doubles) before an insertion would put it above its load limit (max_load_percent of the
 * slots, given to P_init); it never shrinks except by P_destroy.
 *
 * Invariants (hs_assert on every insertion and erase; the whole table walked by P_check
 * under HS_ASSERT_EXPENSIVE after every grow and erase):
 *   - cap is 0 or a power of two >= HS_HASH_TABLE_MIN_CAP; count <= cap * max_load / 100;
 *   - every entry sits in its home slot or after it in its probe run, with no empty slot
 *     between its home and it;
 *   - count is the number of non-empty slots;
 *   - no two entries have the same key (P_put's precondition; not walked: the table cannot
 *     read a key back from an entry).
 *
 * Memory comes only from the allocator given to P_init (the private arena in the preloaded
 * libraries, malloc in the tools); the table itself allocates nothing else, takes no lock and
 * is async-signal-safe when its allocator is. One writer at a time; lookups may run
 * concurrently with each other. A failed allocation leaves the table as it was.
 *
 * Pointers to slots are valid until the next insertion (which may grow the table) or erase
 * (which may move entries). Iteration (P_next) sees each entry once provided the table is not
 * changed meanwhile.
 */
#ifndef HEAPSCOPE_COMMON_HASH_TABLE_H
#define HEAPSCOPE_COMMON_HASH_TABLE_H

#include "hs_assert.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HS_HASH_TABLE_MIN_CAP 16u

/* Where a table's slot arrays come from and go to. alloc returns `size` bytes (need not be
 * zeroed) or NULL; free receives the size that was allocated. */
struct hs_table_alloc {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *p, size_t size);
    void *ctx;
};

/* The slot of hash h in a table of 2^(64 - shift) slots (Fibonacci hashing). */
static inline size_t hs_hash_table_home(uint64_t h, unsigned shift)
{
    return (size_t)((h * 0x9e3779b97f4a7c15ull) >> shift);
}

/* True when slot j's entry, whose home is h, may move to the freed slot i: its home is not in
 * the cyclic range (i, j] (moving it would put it before its home). */
static inline bool hs_hash_table_may_shift(size_t h, size_t i, size_t j)
{
    return i <= j ? (h <= i || h > j) : (h <= i && h > j);
}

#define HS_HASH_TABLE_DEFINE(P, entry_t, key_t, key_hash, entry_hash, entry_matches,               \
                             entry_is_empty, entry_clear)                                          \
    struct P {                                                                                     \
        entry_t *slots;                                                                            \
        size_t cap;   /* 0 or a power of two */                                                    \
        size_t count; /* non-empty slots */                                                        \
        unsigned shift;                                                                            \
        unsigned max_load_percent;                                                                 \
        const void *ctx;                                                                           \
        struct hs_table_alloc alloc;                                                               \
    };                                                                                             \
                                                                                                   \
    /* An empty table: nothing is allocated before the first insertion. */                         \
    static inline void P##_init(struct P *t, const struct hs_table_alloc *alloc, const void *ctx,  \
                                unsigned max_load_percent)                                         \
    {                                                                                              \
        hs_assert(max_load_percent >= 10 && max_load_percent <= 90);                               \
        *t = (struct P){.max_load_percent = max_load_percent, .ctx = ctx, .alloc = *alloc};        \
    }                                                                                              \
                                                                                                   \
    static inline void P##_destroy(struct P *t)                                                    \
    {                                                                                              \
        if (t->slots)                                                                              \
            t->alloc.free(t->alloc.ctx, t->slots, t->cap * sizeof(entry_t));                       \
        t->slots = NULL;                                                                           \
        t->cap = t->count = 0;                                                                     \
    }                                                                                              \
                                                                                                   \
    static inline size_t P##_home(const struct P *t, const entry_t *e)                             \
    {                                                                                              \
        return hs_hash_table_home(entry_hash(e, t->ctx), t->shift);                                \
    }                                                                                              \
                                                                                                   \
    /* Walks the whole table and checks the invariants of the header (O(cap)): from an empty       \
     * slot round the table, each entry's home lies in its run, between the run's first slot       \
     * and the entry. */                                                                           \
    static inline void P##_check(const struct P *t)                                                \
    {                                                                                              \
        if (t->cap == 0) {                                                                         \
            hs_assert(t->count == 0);                                                              \
            return;                                                                                \
        }                                                                                          \
        hs_assert((t->cap & (t->cap - 1)) == 0 && t->cap >= HS_HASH_TABLE_MIN_CAP);                \
        hs_assert(t->count * 100 <= t->cap * t->max_load_percent);                                 \
        size_t mask = t->cap - 1, s = 0, n = 0;                                                    \
        while (s < t->cap && !entry_is_empty(&t->slots[s]))                                        \
            s++;                                                                                   \
        hs_assert(s < t->cap);                                                                     \
        size_t run = (s + 1) & mask;                                                               \
        for (size_t k = 1; k <= t->cap; k++) {                                                     \
            size_t i = (s + k) & mask;                                                             \
            if (entry_is_empty(&t->slots[i])) {                                                    \
                run = (i + 1) & mask;                                                              \
                continue;                                                                          \
            }                                                                                      \
            n++;                                                                                   \
            size_t h = P##_home(t, &t->slots[i]);                                                  \
            hs_assert(((h - run) & mask) <= ((i - run) & mask));                                   \
        }                                                                                          \
        hs_assert(n == t->count);                                                                  \
    }                                                                                              \
                                                                                                   \
    /* The slot of the entry with key k, or NULL. */                                               \
    static inline entry_t *P##_find(const struct P *t, const key_t *k)                             \
    {                                                                                              \
        if (t->count == 0)                                                                         \
            return NULL;                                                                           \
        size_t mask = t->cap - 1;                                                                  \
        for (size_t i = hs_hash_table_home(key_hash(k, t->ctx), t->shift);; i = (i + 1) & mask) {  \
            entry_t *e = &t->slots[i];                                                             \
            if (entry_is_empty(e))                                                                 \
                return NULL;                                                                       \
            if (entry_matches(e, k, t->ctx))                                                       \
                return e;                                                                          \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Stores e, whose key must be absent, in a table with room for it (P_reserve). */             \
    static inline entry_t *P##_put(struct P *t, const entry_t *e)                                  \
    {                                                                                              \
        hs_assert(!entry_is_empty(e));                                                             \
        hs_assert((t->count + 1) * 100 <= t->cap * t->max_load_percent);                           \
        size_t mask = t->cap - 1, i = P##_home(t, e);                                              \
        while (!entry_is_empty(&t->slots[i]))                                                      \
            i = (i + 1) & mask;                                                                    \
        t->slots[i] = *e;                                                                          \
        t->count++;                                                                                \
        return &t->slots[i];                                                                       \
    }                                                                                              \
                                                                                                   \
    /* Room for `more` further entries without passing the load limit; false (the table as it      \
     * was) when the allocator fails or the size would overflow. The entries are rehashed          \
     * with entry_hash, so ctx must already see every entry's key. */                              \
    static inline bool P##_reserve(struct P *t, size_t more)                                       \
    {                                                                                              \
        if (more > SIZE_MAX / 100 - t->count)                                                      \
            return false;                                                                          \
        size_t need = (t->count + more) * 100;                                                     \
        if (t->cap != 0 && need <= t->cap * t->max_load_percent)                                   \
            return true;                                                                           \
        size_t cap = t->cap ? t->cap : HS_HASH_TABLE_MIN_CAP;                                      \
        unsigned shift = t->cap ? t->shift : 64 - 4;                                               \
        while (need > cap * t->max_load_percent) {                                                 \
            if (cap > SIZE_MAX / 200 / sizeof(entry_t))                                            \
                return false;                                                                      \
            cap *= 2;                                                                              \
            shift--;                                                                               \
        }                                                                                          \
        entry_t *slots = t->alloc.alloc(t->alloc.ctx, cap * sizeof(entry_t));                      \
        if (!slots)                                                                                \
            return false;                                                                          \
        for (size_t i = 0; i < cap; i++)                                                           \
            entry_clear(&slots[i]);                                                                \
        struct P old = *t;                                                                         \
        t->slots = slots;                                                                          \
        t->cap = cap;                                                                              \
        t->shift = shift;                                                                          \
        t->count = 0;                                                                              \
        for (size_t i = 0; i < old.cap; i++)                                                       \
            if (!entry_is_empty(&old.slots[i]))                                                    \
                P##_put(t, &old.slots[i]);                                                         \
        hs_assert(t->count == old.count);                                                          \
        if (old.slots)                                                                             \
            t->alloc.free(t->alloc.ctx, old.slots, old.cap * sizeof(entry_t));                     \
        if (HS_ASSERT_EXPENSIVE)                                                                   \
            P##_check(t);                                                                          \
        return true;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* The slot of key k; when k is absent (*inserted set true) a new slot counted in the          \
     * table, still empty, in which the caller must store an entry with key k before any other     \
     * call. NULL when the table had to grow and could not (nothing changed). */                   \
    static inline entry_t *P##_find_or_insert(struct P *t, const key_t *k, bool *inserted)         \
    {                                                                                              \
        entry_t *e = P##_find(t, k);                                                               \
        *inserted = false;                                                                         \
        if (e)                                                                                     \
            return e;                                                                              \
        if (!P##_reserve(t, 1))                                                                    \
            return NULL;                                                                           \
        size_t mask = t->cap - 1, i = hs_hash_table_home(key_hash(k, t->ctx), t->shift);           \
        while (!entry_is_empty(&t->slots[i]))                                                      \
            i = (i + 1) & mask;                                                                    \
        t->count++;                                                                                \
        *inserted = true;                                                                          \
        return &t->slots[i];                                                                       \
    }                                                                                              \
                                                                                                   \
    /* Removes the entry in slot e (from P_find or P_next): the later entries of its probe run     \
     * that may move back fill the hole, so no tombstone is left. */                               \
    static inline void P##_erase(struct P *t, entry_t *e)                                          \
    {                                                                                              \
        hs_assert(e >= t->slots && e < t->slots + t->cap && !entry_is_empty(e));                   \
        size_t mask = t->cap - 1, i = (size_t)(e - t->slots);                                      \
        for (size_t j = (i + 1) & mask; !entry_is_empty(&t->slots[j]); j = (j + 1) & mask) {       \
            if (hs_hash_table_may_shift(P##_home(t, &t->slots[j]), i, j)) {                        \
                t->slots[i] = t->slots[j];                                                         \
                i = j;                                                                             \
            }                                                                                      \
        }                                                                                          \
        entry_clear(&t->slots[i]);                                                                 \
        t->count--;                                                                                \
        if (HS_ASSERT_EXPENSIVE)                                                                   \
            P##_check(t);                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Removes the entry with key k; false when there is none. */                                  \
    static inline bool P##_remove(struct P *t, const key_t *k)                                     \
    {                                                                                              \
        entry_t *e = P##_find(t, k);                                                               \
        if (!e)                                                                                    \
            return false;                                                                          \
        P##_erase(t, e);                                                                           \
        return true;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* The next entry at or after slot *pos, *pos moved past it; NULL at the end. Start with       \
     * *pos = 0. */                                                                                \
    static inline entry_t *P##_next(const struct P *t, size_t *pos)                                \
    {                                                                                              \
        for (size_t i = *pos; i < t->cap; i++) {                                                   \
            if (!entry_is_empty(&t->slots[i])) {                                                   \
                *pos = i + 1;                                                                      \
                return &t->slots[i];                                                               \
            }                                                                                      \
        }                                                                                          \
        *pos = t->cap;                                                                             \
        return NULL;                                                                               \
    }                                                                                              \
                                                                                                   \
    /* Removes every entry, keeping the slots. */                                                  \
    static inline void P##_clear(struct P *t)                                                      \
    {                                                                                              \
        for (size_t i = 0; i < t->cap; i++)                                                        \
            entry_clear(&t->slots[i]);                                                             \
        t->count = 0;                                                                              \
    }                                                                                              \
                                                                                                   \
    /* The index of slot e (tests, and callers that keep slot numbers). */                         \
    static inline size_t P##_slot_of(const struct P *t, const entry_t *e)                          \
    {                                                                                              \
        return (size_t)(e - t->slots);                                                             \
    }

/* Allocators for tables outside the preloaded libraries: malloc/free. Defined only where
 * HS_HASH_TABLE_LIBC is set before the include, so a preloaded file cannot use them by
 * mistake. */
#ifdef HS_HASH_TABLE_LIBC
#include <stdlib.h>
static inline void *hs_table_libc_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}
static inline void hs_table_libc_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}
__attribute__((unused)) static const struct hs_table_alloc hs_table_libc = {
    hs_table_libc_alloc, hs_table_libc_free, NULL};
#endif

#endif
