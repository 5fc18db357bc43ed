/* glibc_heap.c: listing the allocations of glibc's malloc from a snapshot (see glibc_heap.h).
 *
 * Steps: parse the captured maps; find main_arena by its signature in libc's writable data;
 * collect the heaps (the main one from main_arena's top, the non-main arenas' from their
 * heap_info headers) and pick each one's first chunk by walking; pass 1 walks every heap and
 * keeps the 0x290-byte chunks (tcache candidates); the set of free-looking-in-use chunks is
 * built from every arena's fastbins and the confirmed tcaches; pass 2 walks again and lists
 * the in-use chunks outside that set, then scans the anonymous mappings for mmapped chunks.
 */
#include "glibc_heap.h"

#include "glibc_free_chunks.h"
#include "glibc_malloc.h"
#include "heap_walker.h"
#include "log.h"
#include "captured_maps.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "sort.h"

#include <errno.h>
#include <string.h>

#define PAGE 4096ul
/* Pages tried as the main heap's start when the brk area is merged into .bss (4 MiB of .bss
 * tail before it). */
#define MAIN_HEAP_TRIES 1024u
/* Bytes of an arena heap searched for its first chunk when glibc's offset does not walk. */
#define FIRST_CHUNK_SEARCH 4096u

/* One heap: chunks from `first`, up to `end` (reads stay below end). */
struct gh_heap {
    uintptr_t begin;        /* start of the heap's memory (its heap_info for an arena heap) */
    uintptr_t first;        /* first chunk */
    uintptr_t end;          /* end of the chunks: the top chunk's end in an arena heap */
    uintptr_t reserved_end; /* end of the heap's writable memory (skipped by the mmap scan) */
    uintptr_t top;          /* the arena's top chunk when it is in this heap, else 0 */
    bool main;              /* main arena: no NON_MAIN_ARENA bit on its chunks */
};

struct range {
    uintptr_t begin, end;
};

enum walk_end { WALK_TOP, WALK_FENCE, WALK_BAD };

struct gh {
    const struct hs_mu_capture *capture;
    struct hs_arena *arena;
    struct hs_mu_maps maps;
    struct gh_heap *heaps;
    size_t num_heaps, cap_heaps;
    uintptr_t *arenas; /* malloc_states; main_arena first */
    size_t num_arenas, cap_arenas;
    uintptr_t *tcaches; /* 0x290-byte in-use chunks (pass 1) */
    size_t num_tcaches, cap_tcaches;
    struct hs_mu_glibc_free_chunks free;
    struct hs_mu_glibc_heap_stats stats;
    bool oom;
    uintptr_t first_bad_heap, first_bad_chunk;
    /* The listing (pass 2). */
    void (*callback)(uintptr_t ptr, size_t size, void *arg);
    void *arg;
    uintptr_t base;
    size_t size;
};

/* ---- small helpers ---- */

static bool grow(struct gh *g, void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need)
        ncap *= 2;
    void *p = hs_arena_alloc(g->arena, ncap * elem);
    if (!p) {
        g->oom = true;
        return false;
    }
    if (*array) {
        memcpy(p, *array, *cap * elem);
        hs_arena_free(g->arena, *array, *cap * elem);
    }
    *array = p;
    *cap = ncap;
    return true;
}

static void release(struct gh *g, void *array, size_t cap, size_t elem)
{
    if (array)
        hs_arena_free(g->arena, array, cap * elem);
}

static uintptr_t read_word(uintptr_t addr)
{
    uintptr_t v;
    hs_mu_read_guarded(&v, addr, sizeof(v));
    return v;
}

static bool is_rw(const struct hs_mu_map *m)
{
    unsigned rw = HS_MAP_READ | HS_MAP_WRITE;
    return (m->perms & rw) == rw;
}

/* True when [addr, addr + len) lies in one readable and writable mapping. */
static bool rw_range(struct gh *g, uintptr_t addr, uintptr_t len)
{
    const struct hs_mu_map *m = hs_mu_maps_find(&g->maps, addr);
    return m && is_rw(m) && len <= m->end - addr;
}

/* ---- main_arena ---- */

static bool chunk_pointer(uintptr_t p)
{
    return p != 0 && (p & (HS_GLIBC_ALIGN - 1)) == 0;
}

/* True when the memory at m looks like glibc's main_arena (see glibc_malloc.h): lock and
 * fastchunk flag in range, fastbins NULL or chunk pointers, top the arena's own unsorted bin
 * (never used) or a chunk in a writable heap mapping, every bin empty (pointing at itself) or
 * holding chunk pointers (at most two half updated), and sane system_mem figures. */
static bool looks_like_main_arena(struct gh *g, uintptr_t m)
{
    uintptr_t top = read_word(m + HS_GLIBC_MSTATE_TOP);
    uintptr_t unsorted = m + HS_GLIBC_MSTATE_TOP; /* bin 1's address: &bins[0] - 16 */
    if (!chunk_pointer(top))
        return false;
    if (top != unsorted) {
        const struct hs_mu_map *tm = hs_mu_maps_find(&g->maps, top);
        if (!tm || !is_rw(tm) || (tm->kind != HS_MU_MAP_HEAP && tm->kind != HS_MU_MAP_ANON))
            return false;
    }
    uint32_t head[3];
    hs_mu_read_guarded(head, m, sizeof(head));
    if (head[0] > 2 || head[2] > 1) /* lll lock values; have_fastchunks is a bool */
        return false;
    uintptr_t fast[HS_GLIBC_NFASTBINS];
    hs_mu_read_guarded(fast, m + HS_GLIBC_MSTATE_FASTBINS, sizeof(fast));
    for (unsigned i = 0; i < HS_GLIBC_NFASTBINS; i++)
        if (fast[i] != 0 && !chunk_pointer(fast[i]))
            return false;
    uintptr_t bins[2 * HS_GLIBC_NBINS];
    hs_mu_read_guarded(bins, m + HS_GLIBC_MSTATE_BINS, sizeof(bins));
    unsigned empty = 0, half = 0;
    for (unsigned i = 0; i < HS_GLIBC_NBINS; i++) {
        uintptr_t self = m + HS_GLIBC_MSTATE_BINS + 16u * i - 16u;
        uintptr_t fd = bins[2 * i], bk = bins[2 * i + 1];
        if (fd == self && bk == self)
            empty++;
        else if (!chunk_pointer(fd) || !chunk_pointer(bk))
            return false;
        else if (fd == self || bk == self)
            half++; /* a thread caught between the two stores of a bin update */
    }
    if (empty < 32 || half > 2)
        return false;
    uintptr_t next = read_word(m + HS_GLIBC_MSTATE_NEXT);
    uintptr_t sys = read_word(m + HS_GLIBC_MSTATE_SYSTEM_MEM);
    uintptr_t max_sys = read_word(m + HS_GLIBC_MSTATE_MAX_SYSTEM_MEM);
    return next != 0 && (next & 7) == 0 && sys <= max_sys;
}

static uintptr_t find_main_arena(struct gh *g)
{
    for (size_t i = 0; i < g->maps.num; i++) {
        const struct hs_mu_map *m = &g->maps.maps[i];
        if (!m->libc || !is_rw(m) || m->end - m->start < HS_GLIBC_MSTATE_SIZE)
            continue;
        for (uintptr_t a = m->start; a + HS_GLIBC_MSTATE_SIZE <= m->end; a += 16)
            if (looks_like_main_arena(g, a))
                return a;
    }
    return 0;
}

/* ---- walking a heap ---- */

typedef void (*visit_fn)(struct gh *g, uintptr_t chunk, uintptr_t csize);

/* Walks the chunks of h from `first`, calling visit for each in-use one (fenceposts and the
 * top chunk excluded). Returns how the walk ended: at h->top (WALK_TOP, top's own size
 * checked), at the fenceposts closing an older heap (WALK_FENCE), or at an inconsistent chunk
 * (WALK_BAD); *stop is where. Reads stay inside [first, h->end); the chunk address grows at
 * every step, so the walk always ends.
 * sysmalloc closes an older heap with a zero-size header in its last 16 bytes, after a 16-byte
 * fencepost, or after a 32-byte one (flags PREV_INUSE only) when the old top had no room for
 * a free chunk and a 16-byte fencepost. */
static enum walk_end walk_heap(struct gh *g, const struct gh_heap *h, uintptr_t first,
                               visit_fn visit, uintptr_t *stop)
{
    const uintptr_t non_main = h->main ? 0 : HS_GLIBC_NON_MAIN_ARENA;
    uintptr_t c = first, hdr[2];
    *stop = c;
    if ((c & (HS_GLIBC_ALIGN - 1)) || c < h->begin || c >= h->end || h->end - c < 16)
        return WALK_BAD;
    hs_mu_read_guarded(hdr, c, sizeof(hdr));
    bool after_fence = false;
    for (;;) {
        *stop = c;
        uintptr_t size = hdr[1], csize = size & ~(uintptr_t)HS_GLIBC_FLAGS;
        if (c == h->top) {
            bool fits = csize >= HS_GLIBC_MIN_CHUNK && csize <= h->end - c &&
                        (h->main || csize == h->end - c);
            return fits ? WALK_TOP : WALK_BAD;
        }
        if (csize == 0)
            return after_fence && c == h->end - 16 ? WALK_FENCE : WALK_BAD;
        if ((csize & (HS_GLIBC_ALIGN - 1)) || (size & HS_GLIBC_IS_MMAPPED) || csize > h->end - c ||
            h->end - c - csize < 16)
            return WALK_BAD;
        uintptr_t next = c + csize, next_hdr[2];
        hs_mu_read_guarded(next_hdr, next, sizeof(next_hdr));
        after_fence =
            csize == HS_GLIBC_CHUNK_HDR ||
            (csize == HS_GLIBC_MIN_CHUNK && (size & HS_GLIBC_FLAGS) == HS_GLIBC_PREV_INUSE &&
             (next_hdr[1] & ~(uintptr_t)HS_GLIBC_FLAGS) == 0 && next == h->end - 16);
        if (!after_fence && (next_hdr[1] & HS_GLIBC_PREV_INUSE)) {
            if ((size & HS_GLIBC_NON_MAIN_ARENA) != non_main)
                return WALK_BAD;
            if (visit)
                visit(g, c, csize);
        }
        c = next;
        hdr[0] = next_hdr[0];
        hdr[1] = next_hdr[1];
    }
}

/* The end a walk of h must reach to show its first chunk is right. */
static enum walk_end expected_end(const struct gh_heap *h)
{
    return h->top ? WALK_TOP : WALK_FENCE;
}

static bool add_heap(struct gh *g, const struct gh_heap *h)
{
    if (!grow(g, (void **)&g->heaps, &g->cap_heaps, g->num_heaps + 1, sizeof(*g->heaps)))
        return false;
    g->heaps[g->num_heaps++] = *h;
    return true;
}

static void add_arena(struct gh *g, uintptr_t mstate)
{
    for (size_t i = 0; i < g->num_arenas; i++)
        if (g->arenas[i] == mstate)
            return;
    if (grow(g, (void **)&g->arenas, &g->cap_arenas, g->num_arenas + 1, sizeof(*g->arenas)))
        g->arenas[g->num_arenas++] = mstate;
}

/* The main arena's heap: the mapping holding its top chunk, from its start ([heap]) or from
 * the first page that walks exactly to top (brk area merged into .bss). */
static void add_main_heap(struct gh *g, uintptr_t main_arena)
{
    uintptr_t top = read_word(main_arena + HS_GLIBC_MSTATE_TOP);
    if (top == main_arena + HS_GLIBC_MSTATE_TOP)
        return; /* the main arena never allocated */
    const struct hs_mu_map *m = hs_mu_maps_find(&g->maps, top);
    if (!m)
        return;
    struct gh_heap h = {.begin = m->start,
                        .first = m->start,
                        .end = m->end,
                        .reserved_end = m->end,
                        .top = top,
                        .main = true};
    uintptr_t stop;
    enum walk_end e = walk_heap(g, &h, h.first, NULL, &stop);
    /* A [heap] walk that got past its first chunk started right (a later inconsistency is
     * counted in pass 1); otherwise look for the start page by page. */
    if (e == WALK_TOP || (m->kind == HS_MU_MAP_HEAP && stop != h.first)) {
        add_heap(g, &h);
        return;
    }
    for (unsigned i = 1; i < MAIN_HEAP_TRIES; i++) {
        uintptr_t p = m->start + i * PAGE;
        if (p > top)
            break;
        if (walk_heap(g, &h, p, NULL, &stop) == WALK_TOP) {
            h.begin = h.first = p;
            add_heap(g, &h);
            return;
        }
    }
    if (m->kind == HS_MU_MAP_HEAP) {
        add_heap(g, &h); /* walked as far as it goes; counted as bad in pass 1 */
        return;
    }
    hs_log_tag(HS_MU_LOG_TAG,
               "glibc heap: cannot find the start of the main heap (top chunk at "
               "0x%lx); its blocks are not listed",
               (unsigned long)top);
}

/* The heap_info at a (64 MiB aligned) in mapping m, validated; fills *h and returns the
 * arena's malloc_state, or 0. */
static uintptr_t arena_heap_at(struct gh *g, uintptr_t a, const struct hs_mu_map *m,
                               struct gh_heap *h)
{
    uintptr_t hi[4]; /* ar_ptr, prev, size, mprotect_size */
    if (m->end - a < HS_GLIBC_HEAP_INFO_SIZE)
        return 0;
    hs_mu_read_guarded(hi, a, sizeof(hi));
    uintptr_t ar = hi[0], prev = hi[1], size = hi[2], mprotect_size = hi[3];
    if (!chunk_pointer(ar) || size == 0 || size > mprotect_size ||
        mprotect_size > HS_GLIBC_HEAP_MAX || mprotect_size > m->end - a || (size & (PAGE - 1)) ||
        (mprotect_size & (PAGE - 1)) || (prev & (HS_GLIBC_HEAP_MAX - 1)) || prev == a)
        return 0;
    uintptr_t hdr = ar & (HS_GLIBC_HEAP_MAX - 1); /* sizeof(heap_info): malloc_state follows */
    if (hdr != HS_GLIBC_HEAP_INFO_SIZE && hdr != HS_GLIBC_HEAP_INFO_SIZE_OLD)
        return 0;
    bool first_heap = ar - hdr == a;
    if (first_heap != (prev == 0))
        return 0;
    if (first_heap ? size < hdr + HS_GLIBC_MSTATE_SIZE + HS_GLIBC_MIN_CHUNK
                   : !rw_range(g, ar, HS_GLIBC_MSTATE_SIZE))
        return 0;
    uintptr_t top = read_word(ar + HS_GLIBC_MSTATE_TOP);
    h->begin = a;
    h->end = a + size;
    h->reserved_end = a + mprotect_size;
    h->top = top > a && top < a + size ? top : 0;
    h->main = false;
    /* Where glibc puts the first chunk: after the malloc_state (aligned so that user memory
     * is), or right after heap_info in a later heap. */
    h->first = first_heap
                   ? ((ar + HS_GLIBC_MSTATE_SIZE + HS_GLIBC_CHUNK_HDR + 15) & ~(uintptr_t)15) -
                         HS_GLIBC_CHUNK_HDR
                   : a + hdr;
    uintptr_t stop;
    if (walk_heap(g, h, h->first, NULL, &stop) != expected_end(h)) {
        /* Check the offset: find the first chunk from which the walk ends right. */
        uintptr_t from = first_heap ? ar + HS_GLIBC_MSTATE_SIZE : a + HS_GLIBC_HEAP_INFO_SIZE_OLD;
        for (uintptr_t c = (from + 15) & ~(uintptr_t)15; c < a + FIRST_CHUNK_SEARCH && c < h->end;
             c += 16) {
            if (walk_heap(g, h, c, NULL, &stop) == expected_end(h)) {
                h->first = c;
                break;
            }
        }
    }
    return ar;
}

/* Every non-main arena heap: writable anonymous mappings, at each 64 MiB boundary. */
static void add_arena_heaps(struct gh *g)
{
    for (size_t i = 0; i < g->maps.num && !g->oom; i++) {
        const struct hs_mu_map *m = &g->maps.maps[i];
        if (m->kind != HS_MU_MAP_ANON || !is_rw(m))
            continue;
        uintptr_t a = (m->start + HS_GLIBC_HEAP_MAX - 1) & ~(HS_GLIBC_HEAP_MAX - 1);
        for (; a >= m->start && a < m->end; a += HS_GLIBC_HEAP_MAX) {
            struct gh_heap h;
            uintptr_t ar = arena_heap_at(g, a, m, &h);
            if (ar && add_heap(g, &h))
                add_arena(g, ar);
        }
    }
}

static int by_begin(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = ((const struct gh_heap *)pa)->begin, b = ((const struct gh_heap *)pb)->begin;
    return a < b ? -1 : a > b;
}

/* For glibc_free_chunks: [chunk, chunk + size) inside a walked heap. */
static bool in_heap(uintptr_t chunk, uintptr_t size, void *ctx)
{
    struct gh *g = ctx;
    size_t lo = hs_range_first_ending_after(g->heaps, g->num_heaps, chunk, end);
    if (lo == g->num_heaps)
        return false;
    const struct gh_heap *h = &g->heaps[lo];
    return chunk >= h->first && size <= h->end - chunk;
}

/* ---- the passes ---- */

static void keep_tcache_candidate(struct gh *g, uintptr_t chunk, uintptr_t csize)
{
    if (csize == HS_GLIBC_TCACHE_CHUNK &&
        grow(g, (void **)&g->tcaches, &g->cap_tcaches, g->num_tcaches + 1, sizeof(*g->tcaches)))
        g->tcaches[g->num_tcaches++] = chunk;
}

static void emit(struct gh *g, uintptr_t ptr, size_t size)
{
    if (ptr - g->base < g->size)
        g->callback(ptr, size, g->arg);
}

static void list_chunk(struct gh *g, uintptr_t chunk, uintptr_t csize)
{
    if (csize <= HS_GLIBC_TCACHE_MAX_CHUNK && hs_mu_glibc_free_chunks_contains(&g->free, chunk))
        return;
    g->stats.chunks++;
    /* The next chunk's prev_size word is lent to this one. */
    emit(g, chunk + HS_GLIBC_CHUNK_HDR, csize - HS_GLIBC_CHUNK_HDR + 8);
}

/* Pass 1: checks each heap's walk (counting the ones cut short) and keeps tcache candidates. */
static void pass_check(struct gh *g)
{
    for (size_t i = 0; i < g->num_heaps; i++) {
        uintptr_t stop;
        if (walk_heap(g, &g->heaps[i], g->heaps[i].first, keep_tcache_candidate, &stop) !=
            expected_end(&g->heaps[i])) {
            if (g->stats.bad_heaps++ == 0) {
                g->first_bad_heap = g->heaps[i].begin;
                g->first_bad_chunk = stop;
            }
        }
    }
}

static void build_free_set(struct gh *g)
{
    for (size_t i = 0; i < g->num_arenas; i++) {
        uint32_t lock;
        hs_mu_read_guarded(&lock, g->arenas[i] + HS_GLIBC_MSTATE_MUTEX, sizeof(lock));
        if (lock != 0)
            g->stats.locked_arenas++;
        hs_mu_glibc_free_chunks_add_fastbins(&g->free, g->arenas[i], in_heap, g);
    }
    for (size_t i = 0; i < g->num_tcaches; i++)
        hs_mu_glibc_free_chunks_add_tcache(&g->free, g->tcaches[i], in_heap, g);
    if (!hs_mu_glibc_free_chunks_finish(&g->free))
        g->oom = true;
}

static int by_range(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = ((const struct range *)pa)->begin, b = ((const struct range *)pb)->begin;
    return a < b ? -1 : a > b;
}

/* Mmapped chunks: page starts of writable private anonymous mappings holding {0, page
 * multiple | IS_MMAPPED} that fits; holes (heaps, excluded ranges) and thread stacks are
 * skipped. One read per page not inside a chunk. */
static void list_mmapped(struct gh *g)
{
    const struct hs_mu_capture *cap = g->capture;
    size_t nholes = g->num_heaps + cap->num_excluded;
    struct range *holes = hs_arena_alloc(g->arena, (nholes ? nholes : 1) * sizeof(*holes));
    if (!holes) {
        g->oom = true;
        return;
    }
    for (size_t i = 0; i < g->num_heaps; i++)
        holes[i] = (struct range){g->heaps[i].begin, g->heaps[i].reserved_end};
    for (size_t i = 0; i < cap->num_excluded; i++)
        holes[g->num_heaps + i] = (struct range){cap->excluded[i].begin, cap->excluded[i].end};
    hs_sort(holes, nholes, sizeof(*holes), by_range, NULL);

    size_t hole = 0;
    for (size_t i = 0; i < g->maps.num; i++) {
        const struct hs_mu_map *m = &g->maps.maps[i];
        if (m->kind != HS_MU_MAP_ANON || !is_rw(m) || !(m->perms & HS_MAP_PRIVATE) ||
            m->thread_stack)
            continue;
        uintptr_t p = m->start & ~(PAGE - 1);
        if (p < m->start)
            p += PAGE;
        while (p < m->end && m->end - p >= 16) {
            while (hole < nholes && holes[hole].end <= p)
                hole++;
            uintptr_t limit = m->end;
            /* Holes may overlap each other: any hole covering p is skipped. */
            bool covered = false;
            for (size_t k = hole; k < nholes && holes[k].begin <= p; k++) {
                if (holes[k].end > p) {
                    p = (holes[k].end + PAGE - 1) & ~(PAGE - 1);
                    covered = true;
                    break;
                }
            }
            if (covered)
                continue;
            if (hole < nholes && holes[hole].begin < limit)
                limit = holes[hole].begin;
            uintptr_t hdr[2];
            hs_mu_read_guarded(hdr, p, sizeof(hdr));
            uintptr_t csize = hdr[1] & ~(uintptr_t)HS_GLIBC_FLAGS;
            if (hdr[0] == 0 && (hdr[1] & HS_GLIBC_FLAGS) == HS_GLIBC_IS_MMAPPED && csize >= PAGE &&
                (csize & (PAGE - 1)) == 0 && csize <= limit - p) {
                g->stats.mmapped_chunks++;
                emit(g, p + HS_GLIBC_CHUNK_HDR, csize - HS_GLIBC_CHUNK_HDR);
                p += csize;
            } else {
                p += PAGE;
            }
        }
    }
    hs_arena_free(g->arena, holes, (nholes ? nholes : 1) * sizeof(*holes));
}

static void log_problems(struct gh *g)
{
    const struct hs_mu_glibc_heap_stats *s = &g->stats;
    if (s->bad_heaps)
        hs_log_tag(HS_MU_LOG_TAG,
                   "glibc heap: %zu heap%s cut short at an inconsistent chunk (first: heap "
                   "0x%lx, chunk 0x%lx): a thread inside malloc at the capture, or a corrupted "
                   "heap; the blocks after it are not listed",
                   s->bad_heaps, s->bad_heaps == 1 ? "" : "s", (unsigned long)g->first_bad_heap,
                   (unsigned long)g->first_bad_chunk);
    if (s->bad_lists)
        hs_log_tag(HS_MU_LOG_TAG,
                   "glibc heap: %zu tcache or fastbin list%s cut at an inconsistent entry "
                   "(first at 0x%lx)",
                   s->bad_lists, s->bad_lists == 1 ? "" : "s",
                   (unsigned long)g->free.first_bad_entry);
    if (s->locked_arenas)
        hs_log_tag(HS_MU_LOG_TAG,
                   "glibc heap: %zu arena%s locked by a thread inside malloc at the capture; "
                   "a block being allocated or freed there may be misreported",
                   s->locked_arenas, s->locked_arenas == 1 ? " was" : "s were");
}

int hs_mu_glibc_heap_walk(const struct hs_mu_capture *capture, struct hs_arena *arena,
                          uintptr_t base, size_t size,
                          void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg,
                          struct hs_mu_glibc_heap_stats *stats)
{
    struct gh g;
    memset(&g, 0, sizeof(g));
    g.capture = capture;
    g.arena = arena;
    g.callback = callback;
    g.arg = arg;
    g.base = base;
    g.size = size;
    hs_mu_glibc_free_chunks_init(&g.free, arena);

    int r = hs_mu_maps_load(&g.maps, capture, arena);
    if (r == 0) {
        g.stats.main_arena = find_main_arena(&g);
        if (!g.stats.main_arena) {
            hs_log_tag(HS_MU_LOG_TAG, "glibc heap: cannot find glibc's main_arena in libc's "
                                      "data (not glibc 2.32+ malloc?)");
            r = -ENOTSUP;
        }
    }
    if (r == 0) {
        add_arena(&g, g.stats.main_arena);
        add_main_heap(&g, g.stats.main_arena);
        add_arena_heaps(&g);
        hs_sort(g.heaps, g.num_heaps, sizeof(*g.heaps), by_begin, NULL);
        pass_check(&g);
        build_free_set(&g);
        if (!g.oom) {
            for (size_t i = 0; i < g.num_heaps; i++) {
                uintptr_t stop;
                walk_heap(&g, &g.heaps[i], g.heaps[i].first, list_chunk, &stop);
            }
            list_mmapped(&g);
        }
        r = g.oom ? -ENOMEM : 0;
    }
    g.stats.arenas = g.num_arenas;
    g.stats.heaps = g.num_heaps;
    g.stats.tcache_structs = g.free.tcache_structs;
    g.stats.tcache_chunks = g.free.tcache_chunks;
    g.stats.fastbin_chunks = g.free.fastbin_chunks;
    g.stats.bad_lists = g.free.bad_lists;
    if (r == 0)
        log_problems(&g);
    if (stats)
        *stats = g.stats;

    hs_mu_glibc_free_chunks_destroy(&g.free);
    release(&g, g.tcaches, g.cap_tcaches, sizeof(*g.tcaches));
    release(&g, g.arenas, g.cap_arenas, sizeof(*g.arenas));
    release(&g, g.heaps, g.cap_heaps, sizeof(*g.heaps));
    hs_mu_maps_free(&g.maps, arena);
    return r;
}

/* ---- the heap source ---- */

/* What prepare recorded for iterate (the sweeper is single-threaded). */
static struct {
    const struct hs_mu_capture *capture;
    struct hs_arena *arena;
} g_source;

static int source_prepare(const struct hs_mu_capture *capture, struct hs_arena *arena)
{
    g_source.capture = capture;
    g_source.arena = arena;
    return 0;
}

static int source_iterate(uintptr_t base, size_t size,
                          void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    if (!g_source.capture)
        return -1;
    return hs_mu_glibc_heap_walk(g_source.capture, g_source.arena, base, size, callback, arg,
                                 NULL) == 0
               ? 0
               : -1;
}

void hs_mu_glibc_heap_source(struct hs_mu_heap_source *heap)
{
    memset(heap, 0, sizeof(*heap));
    heap->iterate = source_iterate;
    heap->prepare = source_prepare;
    heap->group_by_size = true;
}
