/* arena.c: size-class allocator on mmap for the tools' own memory (see arena.h). */
#define _GNU_SOURCE /* mremap */
#include "arena.h"

#include "env.h"
#include "hs_assert.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_BYTES (256u << 10)

/* Class sizes: 16, 32, 48, 64, then four steps per power of two up to 64 KiB. */
static const uint32_t class_size[HS_ARENA_CLASSES] = {
    16,   32,   48,   64,   96,   128,  192,   256,   384,   512,   768,   1024,
    1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536,
};

static int class_of(size_t size)
{
    for (int c = 0; c < HS_ARENA_CLASSES; c++)
        if (size <= class_size[c])
            return c;
    return -1;
}

static void *map_raw(size_t bytes)
{
    int saved = errno;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return p == MAP_FAILED ? NULL : p;
}

/* Fault injection (docs/testing.md): with HEAPSCOPE_ARENA_FAIL_AFTER=N, the first N mappings
 * of the process's arenas succeed and every later one fails, as if memory had run out there.
 * The variable is read on the first mapping; afterwards a mapping costs one predictable
 * branch more (mappings are the slow path: a new 256 KiB chunk or a large block). */
enum { FAULT_UNREAD, FAULT_OFF, FAULT_ARMED };
static int g_fault_state;       /* atomic */
static size_t g_fault_after;    /* N */
static size_t g_fault_mappings; /* mappings asked for so far (atomic) */

static __attribute__((noinline)) bool fault_injected(void)
{
    int state = __atomic_load_n(&g_fault_state, __ATOMIC_ACQUIRE);
    if (state == FAULT_UNREAD) {
        char value[32];
        state = FAULT_OFF;
        size_t n = 0;
        ssize_t len = hs_env_get("HEAPSCOPE_ARENA_FAIL_AFTER", value, sizeof(value));
        if (len > 0 && (size_t)len < sizeof(value)) {
            bool digits = true;
            for (ssize_t i = 0; i < len; i++) {
                digits &= value[i] >= '0' && value[i] <= '9';
                n = n * 10 + (size_t)(value[i] - '0');
            }
            if (digits && len < 19)
                state = FAULT_ARMED;
        }
        __atomic_store_n(&g_fault_after, n, __ATOMIC_RELAXED);
        __atomic_store_n(&g_fault_state, state, __ATOMIC_RELEASE);
    }
    if (state != FAULT_ARMED)
        return false;
    return __atomic_fetch_add(&g_fault_mappings, 1, __ATOMIC_RELAXED) >=
           __atomic_load_n(&g_fault_after, __ATOMIC_RELAXED);
}

/* True when this mapping must fail (fault injection); cheap when it is off. */
static inline bool mapping_fails(void)
{
    return __builtin_expect(__atomic_load_n(&g_fault_state, __ATOMIC_RELAXED) != FAULT_OFF, 0) &&
           fault_injected();
}

static size_t list_bytes(size_t cap)
{
    return (cap * sizeof(struct hs_arena_mapping) + 4095) & ~(size_t)4095;
}

/* Appends [p, p + bytes) to the mapping list; false when the list could not grow. */
static int record_mapping(struct hs_arena *a, void *p, size_t bytes)
{
    hs_spin_lock(&a->maps_lock);
    if (a->num_maps == a->maps_cap) {
        size_t cap = a->maps_cap ? a->maps_cap * 2 : 4096 / sizeof(struct hs_arena_mapping);
        struct hs_arena_mapping *list = map_raw(list_bytes(cap));
        if (!list) {
            hs_spin_unlock(&a->maps_lock);
            return 0;
        }
        if (a->maps) {
            memcpy(list, a->maps, a->num_maps * sizeof(*list));
            munmap(a->maps, list_bytes(a->maps_cap));
        }
        a->maps = list;
        a->maps_cap = cap;
    }
    a->maps[a->num_maps++] = (struct hs_arena_mapping){(uintptr_t)p, (uintptr_t)p + bytes};
    hs_spin_unlock(&a->maps_lock);
    return 1;
}

static void forget_mapping(struct hs_arena *a, void *p)
{
    hs_spin_lock(&a->maps_lock);
    for (size_t i = 0; i < a->num_maps; i++) {
        if (a->maps[i].begin == (uintptr_t)p) {
            a->maps[i] = a->maps[--a->num_maps];
            break;
        }
    }
    hs_spin_unlock(&a->maps_lock);
}

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* hs_arena_use_huge_pages's advice for a large block's mapping. */
static void advise_huge_pages(const struct hs_arena *a, void *p, size_t bytes)
{
    if (a->huge_pages && bytes >= HUGE_PAGE_BYTES) {
        int saved = errno;
        madvise(p, bytes, MADV_HUGEPAGE); /* advice: small pages if refused */
        errno = saved;
    }
}

static void *map_bytes(struct hs_arena *a, size_t bytes)
{
    if (mapping_fails())
        return NULL;
    void *p = map_raw(bytes);
    if (!p)
        return NULL;
    advise_huge_pages(a, p, bytes);
    if (a->track_maps && !record_mapping(a, p, bytes)) {
        munmap(p, bytes);
        return NULL;
    }
    __atomic_add_fetch(&a->mapped_bytes, bytes, __ATOMIC_RELAXED);
    return p;
}

static size_t page_round(size_t size)
{
    return (size + 4095) & ~(size_t)4095;
}

void *hs_arena_alloc(struct hs_arena *a, size_t size)
{
    if (size == 0)
        size = 1;
    int c = class_of(size);
    if (c < 0) {
        if (size > SIZE_MAX - 4096)
            return NULL;
        return map_bytes(a, page_round(size));
    }
    struct hs_arena_class *k = &a->classes[c];
    size_t n = class_size[c];
    hs_spin_lock(&k->lock);
    void *p = k->free_list;
    if (p) {
        memcpy(&k->free_list, p, sizeof(void *));
    } else {
        if (k->limit - k->bump < n) {
            void *chunk = map_bytes(a, CHUNK_BYTES);
            if (!chunk) {
                hs_spin_unlock(&k->lock);
                return NULL;
            }
            k->bump = (uintptr_t)chunk;
            k->limit = k->bump + CHUNK_BYTES;
        }
        p = (void *)k->bump;
        k->bump += n;
    }
    /* Blocks of a class are 16-aligned and within a chunk (a corrupt free list is caught
     * here, before the block is handed out). */
    hs_assert(((uintptr_t)p & 15) == 0);
    hs_spin_unlock(&k->lock);
    return p;
}

void *hs_arena_calloc(struct hs_arena *a, size_t size)
{
    void *p = hs_arena_alloc(a, size);
    if (p && size <= HS_ARENA_MAX_SMALL)
        memset(p, 0, size);
    return p;
}

/* The mapping that began at old now is [p, p + new_bytes) (mremap moved or resized it). */
static void move_mapping(struct hs_arena *a, void *old, void *p, size_t new_bytes)
{
    hs_spin_lock(&a->maps_lock);
    for (size_t i = 0; i < a->num_maps; i++) {
        if (a->maps[i].begin == (uintptr_t)old) {
            a->maps[i] = (struct hs_arena_mapping){(uintptr_t)p, (uintptr_t)p + new_bytes};
            break;
        }
    }
    hs_spin_unlock(&a->maps_lock);
}

void *hs_arena_grow(struct hs_arena *a, void *p, size_t old_size, size_t new_size)
{
    if (!p)
        return hs_arena_alloc(a, new_size);
    if (old_size > HS_ARENA_MAX_SMALL && new_size > HS_ARENA_MAX_SMALL) {
        if (new_size > SIZE_MAX - 4096)
            return NULL;
        size_t old_bytes = page_round(old_size), new_bytes = page_round(new_size);
        if (old_bytes == new_bytes)
            return p;
        if (mapping_fails())
            return NULL;
        int saved = errno;
        void *q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
        errno = saved;
        if (q == MAP_FAILED)
            return NULL;
        advise_huge_pages(a, q, new_bytes); /* a block that grew past the size */
        if (a->track_maps)
            move_mapping(a, p, q, new_bytes);
        if (new_bytes > old_bytes)
            __atomic_add_fetch(&a->mapped_bytes, new_bytes - old_bytes, __ATOMIC_RELAXED);
        else
            __atomic_sub_fetch(&a->mapped_bytes, old_bytes - new_bytes, __ATOMIC_RELAXED);
        return q;
    }
    void *q = hs_arena_alloc(a, new_size);
    if (!q)
        return NULL;
    memcpy(q, p, old_size < new_size ? old_size : new_size);
    hs_arena_free(a, p, old_size);
    return q;
}

void hs_arena_free(struct hs_arena *a, void *p, size_t size)
{
    if (!p)
        return;
    if (size == 0)
        size = 1;
    int c = class_of(size);
    if (c < 0) {
        size_t bytes = page_round(size);
        /* A large block is its own mapping: a misaligned p is a wrong pointer or size. */
        hs_assert(((uintptr_t)p & 4095) == 0);
        if (a->track_maps)
            forget_mapping(a, p);
        munmap(p, bytes);
        __atomic_sub_fetch(&a->mapped_bytes, bytes, __ATOMIC_RELAXED);
        return;
    }
    struct hs_arena_class *k = &a->classes[c];
    hs_assert(((uintptr_t)p & 15) == 0);
    hs_spin_lock(&k->lock);
    /* Freeing the block freed last, again: a double free of the tools' own memory. */
    hs_assert(p != k->free_list);
    memcpy(p, &k->free_list, sizeof(void *));
    k->free_list = p;
    hs_spin_unlock(&k->lock);
}

size_t hs_arena_mapped_bytes(const struct hs_arena *a)
{
    return __atomic_load_n(&a->mapped_bytes, __ATOMIC_RELAXED);
}

void hs_arena_lock_all(struct hs_arena *a)
{
    for (int c = 0; c < HS_ARENA_CLASSES; c++)
        hs_spin_lock(&a->classes[c].lock);
}

void hs_arena_unlock_all(struct hs_arena *a)
{
    for (int c = HS_ARENA_CLASSES - 1; c >= 0; c--)
        hs_spin_unlock(&a->classes[c].lock);
}

void hs_arena_track_mappings(struct hs_arena *a)
{
    a->track_maps = 1;
}

size_t hs_arena_mappings(struct hs_arena *a, struct hs_arena_mapping *out, size_t cap)
{
    if (!a->track_maps)
        return 0;
    hs_spin_lock(&a->maps_lock);
    size_t n = 0;
    for (size_t i = 0; i < a->num_maps; i++, n++)
        if (n < cap)
            out[n] = a->maps[i];
    if (a->maps) {
        if (n < cap)
            out[n] = (struct hs_arena_mapping){(uintptr_t)a->maps,
                                               (uintptr_t)a->maps + list_bytes(a->maps_cap)};
        n++;
    }
    hs_spin_unlock(&a->maps_lock);
    return n;
}

void hs_arena_destroy(struct hs_arena *a)
{
    if (!a->track_maps)
        return;
    /* *a may live in one of the ranges: copy what is needed before unmapping anything. */
    struct hs_arena_mapping *list = a->maps;
    size_t n = a->num_maps, bytes = list_bytes(a->maps_cap);
    for (size_t i = 0; i < n; i++)
        munmap((void *)list[i].begin, list[i].end - list[i].begin);
    if (list)
        munmap(list, bytes);
}

void hs_arena_use_huge_pages(struct hs_arena *a)
{
    a->huge_pages = 1;
}
