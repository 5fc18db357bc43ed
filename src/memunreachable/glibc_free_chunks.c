/* glibc_free_chunks.c: tcache and fastbin chunks of a glibc heap snapshot (see
 * glibc_free_chunks.h). */
#include "glibc_free_chunks.h"

#include "glibc_malloc.h"
#include "heap_walker.h"
#include "range_lookup.h"
#include "sort.h"

#include <string.h>

/* No real list is longer than the heap has chunks; this only bounds a hostile one that the
 * cycle check does not catch (a very long non-repeating chain). */
#define MAX_LIST_STEPS (1u << 22)

void hs_mu_glibc_free_chunks_init(struct hs_mu_glibc_free_chunks *set, struct hs_arena *arena)
{
    memset(set, 0, sizeof(*set));
    set->arena = arena;
}

void hs_mu_glibc_free_chunks_destroy(struct hs_mu_glibc_free_chunks *set)
{
    if (set->chunks)
        hs_arena_free(set->arena, set->chunks, set->cap * sizeof(*set->chunks));
    set->chunks = NULL;
    set->num = set->cap = 0;
}

static void push(struct hs_mu_glibc_free_chunks *set, uintptr_t chunk)
{
    if (set->out_of_memory)
        return;
    if (set->num == set->cap) {
        size_t ncap = set->cap ? set->cap * 2 : 1024;
        uintptr_t *n = hs_arena_alloc(set->arena, ncap * sizeof(*n));
        if (!n) {
            set->out_of_memory = true;
            return;
        }
        if (set->chunks) {
            memcpy(n, set->chunks, set->num * sizeof(*n));
            hs_arena_free(set->arena, set->chunks, set->cap * sizeof(*n));
        }
        set->chunks = n;
        set->cap = ncap;
    }
    set->chunks[set->num++] = chunk;
}

static uintptr_t read_word(uintptr_t addr)
{
    uintptr_t v;
    hs_mu_read_guarded(&v, addr, sizeof(v));
    return v;
}

/* A free chunk of a tcache or fastbin of chunk size csize: aligned, in a walked heap, with
 * that size in its header and not mmapped. */
static bool valid_free_chunk(uintptr_t chunk, uintptr_t csize, hs_mu_glibc_in_heap_fn in_heap,
                             void *ctx)
{
    if (chunk == 0 || (chunk & (HS_GLIBC_ALIGN - 1)) || !in_heap(chunk, csize, ctx))
        return false;
    uintptr_t size = read_word(chunk + 8);
    return (size & ~(uintptr_t)HS_GLIBC_FLAGS) == csize && !(size & HS_GLIBC_IS_MMAPPED);
}

static void bad_list(struct hs_mu_glibc_free_chunks *set, uintptr_t entry)
{
    if (set->bad_lists++ == 0)
        set->first_bad_entry = entry;
}

/* Follows a singly linked free list from `chunk` (its first chunk). Each next pointer is
 * stored safe-linked in the chunk's first user word, and points `into` bytes into the next
 * chunk: 16 (its user memory) in a tcache, 0 (its header) in a fastbin. Adds at most
 * max_steps chunks; returns how many it added. */
static size_t follow_list(struct hs_mu_glibc_free_chunks *set, uintptr_t chunk, uintptr_t csize,
                          uintptr_t into, size_t max_steps, hs_mu_glibc_in_heap_fn in_heap,
                          void *ctx)
{
    const uintptr_t link = HS_GLIBC_CHUNK_HDR;
    uintptr_t saved = 0; /* Brent: a chunk seen earlier; meeting it again means a loop */
    size_t power = 1, since_saved = 0, n = 0;
    while (chunk != 0) {
        if (n == max_steps || n == MAX_LIST_STEPS) {
            bad_list(set, chunk + link); /* longer than its count says */
            break;
        }
        if (!valid_free_chunk(chunk, csize, in_heap, ctx) || chunk == saved) {
            bad_list(set, chunk + link);
            break;
        }
        push(set, chunk);
        n++;
        if (++since_saved == power) {
            saved = chunk;
            power *= 2;
            since_saved = 0;
        }
        uintptr_t next = hs_glibc_reveal(chunk + link, read_word(chunk + link));
        chunk = next >= into ? next - into : 0;
    }
    return n;
}

void hs_mu_glibc_free_chunks_add_fastbins(struct hs_mu_glibc_free_chunks *set, uintptr_t mstate,
                                          hs_mu_glibc_in_heap_fn in_heap, void *ctx)
{
    uintptr_t bins[HS_GLIBC_NFASTBINS];
    hs_mu_read_guarded(bins, mstate + HS_GLIBC_MSTATE_FASTBINS, sizeof(bins));
    for (unsigned i = 0; i < HS_GLIBC_NFASTBINS; i++)
        set->fastbin_chunks += follow_list(set, bins[i], hs_glibc_bin_chunk_size(i), 0,
                                           MAX_LIST_STEPS, in_heap, ctx);
}

bool hs_mu_glibc_free_chunks_add_tcache(struct hs_mu_glibc_free_chunks *set, uintptr_t chunk,
                                        hs_mu_glibc_in_heap_fn in_heap, void *ctx)
{
    struct {
        uint16_t counts[HS_GLIBC_TCACHE_BINS];
        uintptr_t entries[HS_GLIBC_TCACHE_BINS];
    } t;
    _Static_assert(sizeof(t) + HS_GLIBC_CHUNK_HDR - 8 <= HS_GLIBC_TCACHE_CHUNK,
                   "tcache_perthread_struct does not fit its chunk");
    hs_mu_read_guarded(&t, chunk + HS_GLIBC_CHUNK_HDR, sizeof(t));
    unsigned disagree = 0, used = 0;
    for (unsigned i = 0; i < HS_GLIBC_TCACHE_BINS; i++) {
        uintptr_t e = t.entries[i];
        if ((t.counts[i] == 0) != (e == 0))
            disagree++;
        if (e == 0)
            continue;
        if (e < HS_GLIBC_CHUNK_HDR ||
            !valid_free_chunk(e - HS_GLIBC_CHUNK_HDR, hs_glibc_bin_chunk_size(i), in_heap, ctx))
            return false;
        used++;
    }
    if (used == 0 || disagree > 1)
        return false;

    set->tcache_structs++;
    push(set, chunk);
    for (unsigned i = 0; i < HS_GLIBC_TCACHE_BINS; i++) {
        if (t.entries[i] == 0)
            continue;
        /* One more than the count: the count may lag its list by one (see the header). */
        set->tcache_chunks +=
            follow_list(set, t.entries[i] - HS_GLIBC_CHUNK_HDR, hs_glibc_bin_chunk_size(i),
                        HS_GLIBC_CHUNK_HDR, (size_t)t.counts[i] + 1, in_heap, ctx);
    }
    return true;
}

static int by_address(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = *(const uintptr_t *)pa, b = *(const uintptr_t *)pb;
    return a < b ? -1 : a > b;
}

bool hs_mu_glibc_free_chunks_finish(struct hs_mu_glibc_free_chunks *set)
{
    hs_sort(set->chunks, set->num, sizeof(*set->chunks), by_address, NULL);
    size_t n = 0;
    for (size_t i = 0; i < set->num; i++)
        if (n == 0 || set->chunks[n - 1] != set->chunks[i])
            set->chunks[n++] = set->chunks[i];
    set->num = n;
    return !set->out_of_memory;
}

bool hs_mu_glibc_free_chunks_contains(const struct hs_mu_glibc_free_chunks *set, uintptr_t chunk)
{
    size_t lo = hs_partition_point(set->num, i, set->chunks[i] >= chunk);
    return lo < set->num && set->chunks[lo] == chunk;
}
