/* free_queue.c: free_track's per-thread rings of freed blocks (see free_queue.h).
 *
 * Each thread that frees gets a ring of its own (attached on its first free), so a free
 * writes only cache lines of its own thread: the ring's lock (uncontended but for error
 * paths, exit and fork), its slots, and the blocks it evicts, which that thread freed and
 * glibc takes back into the arena they came from, without the cross-arena lock traffic of a
 * block that another thread freed. The budget N (free_track=N) is shared out: a ring keeps
 * at most max(1, N / rings in use) blocks, so the process keeps about the last N freed
 * blocks, each ring in first-in, first-out order (exactly N, in order, with one thread).
 * A thread that exits leaves its ring, blocks and all, to the next thread that attaches
 * one; until then those blocks stay queued, are found by double-free lookups and are
 * checked at exit.
 *
 * Lookups (a double free, a realloc after free) come from any thread: they walk every ring
 * under each ring's lock. The rings are on a list that only grows; a ring is never freed.
 *
 * Free backtraces: when free_track_backtrace_num_frames is at most
 * HS_MD_FREE_QUEUE_INLINE_FRAMES (16), a ring has a row of 16 frames per slot, where a free
 * copies its frames: a few stores, where a record of the backtrace table (a hash, a lookup,
 * a reference count taken on free and dropped on eviction) cost about a hundred instructions
 * per free for frames that are read only when the block is reported. A block leaving the
 * ring takes its row along (a fixed-size copy, no call: its row is reused by the free that
 * evicts it). Deeper backtraces, and guarded blocks' (which guarded memory keeps with the
 * block), stay table records.
 *
 * Locks: g_registry.lock (the list, the owned flags, the number in use), then each ring's
 * lock in list order; a free takes only its own ring's. The fork handlers take them all;
 * in the child, only the forking thread's ring stays attached.
 */
#include "free_queue.h"

#include "backtrace.h"
#include "byte_check.h"
#include "debug_state.h"
#include "guarded.h"
#include "header.h"
#include "hs_assert.h"
#include "libc_malloc.h"
#include "log.h"
#include "report.h"
#include "spinlock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct freed {
    void *ptr;
    void *orig;
    size_t usable;
    struct hs_md_bt *bt;  /* a table record of the free backtrace, or NULL */
    uint32_t num_frames;  /* or this many frames in the slot's row of the ring */
};

/* A block that left its ring, with its frames. */
struct evicted {
    struct freed f;
    uintptr_t frames[HS_MD_FREE_QUEUE_INLINE_FRAMES];
};

/* Slots of a ring's first array; it doubles (up to the budget) as its quota needs. */
#define FIRST_CAPACITY 16
/* Most blocks one free evicts: a ring over its quota (more threads now share the budget)
 * shrinks by one block per free beyond the one it replaces, so no free pays for many. */
#define MAX_EVICT 2

struct ring {
    hs_spinlock lock;
    struct freed *slots; /* capacity slots; guarded by lock */
    uintptr_t *frames;   /* capacity rows of `row` frames, one per slot; guarded by lock */
    size_t row;          /* frames a row holds (HS_MD_FREE_QUEUE_INLINE_FRAMES or 0), fixed
                          * when the ring is made */
    size_t capacity;
    size_t head; /* oldest */
    size_t count;
    bool owned;        /* a live thread frees into it; guarded by g_registry.lock */
    struct ring *next; /* the registry's list; set before the ring is published */
} __attribute__((aligned(64)));

static struct {
    hs_spinlock lock;
    struct ring *rings; /* every ring ever made, newest first (read with acquire) */
    size_t owned;       /* rings attached to a thread */
    size_t quota;       /* blocks a ring may keep: max(1, budget / owned), kept with owned so
                         * that a free divides nothing (read relaxed on every free) */
    size_t orphans;     /* rings of exited threads still holding blocks (read relaxed on
                         * every free; written when a thread exits or a ring empties) */
    size_t budget;      /* free_track's N */
    size_t row;         /* frames per slot of a new ring (0: free backtraces are records) */
    bool key_ok;        /* exit_key was created */
    pthread_key_t exit_key;
} g_registry;

static __thread struct ring *t_ring __attribute__((tls_model("initial-exec")));

/* Sets the number of attached rings and each one's share of the budget; registry lock held
 * (or the only thread, in a fork child). */
static void set_owned(size_t owned)
{
    size_t share = g_registry.budget / (owned ? owned : 1);
    __atomic_store_n(&g_registry.owned, owned, __ATOMIC_RELAXED);
    __atomic_store_n(&g_registry.quota, share ? share : 1, __ATOMIC_RELAXED);
}

/* Slot index of a ring's i-th oldest block (i < capacity): a compare, not a division. */
static inline size_t ring_index(const struct ring *q, size_t i)
{
    size_t at = q->head + i;
    return at >= q->capacity ? at - q->capacity : at;
}

/* The frames row of slot `at` (NULL when the ring keeps no frames). A ring with rows has
 * rows of HS_MD_FREE_QUEUE_INLINE_FRAMES: a constant, so the index is a shift. */
static inline uintptr_t *row_of(const struct ring *q, size_t at)
{
    return q->row ? q->frames + at * HS_MD_FREE_QUEUE_INLINE_FRAMES : NULL;
}

/* Copies the first n frames of a row into a row-sized array: four at a time, in copies of
 * a constant size (inline, no call; a row holds a multiple of four). */
_Static_assert(HS_MD_FREE_QUEUE_INLINE_FRAMES % 4 == 0, "copy_row copies four frames a step");

static inline void copy_row(uintptr_t *to, const uintptr_t *row, size_t n)
{
    for (size_t i = 0; i < n; i += 4)
        memcpy(to + i, row + i, 4 * sizeof(*row));
}

/* Thread exit (the key's destructor): the ring goes back to the registry with its blocks. */
static void detach(void *arg)
{
    struct ring *q = arg;
    hs_spin_lock(&g_registry.lock);
    if (q->owned) {
        q->owned = false;
        set_owned(g_registry.owned - 1);
        hs_spin_lock(&q->lock);
        if (q->count > 0)
            __atomic_store_n(&g_registry.orphans, g_registry.orphans + 1, __ATOMIC_RELAXED);
        hs_spin_unlock(&q->lock);
    }
    hs_spin_unlock(&g_registry.lock);
    t_ring = NULL;
}

void hs_md_free_queue_init(size_t capacity, size_t frames)
{
    g_registry.budget = capacity ? capacity : 1;
    /* Rows of one size (copies of a constant size); none without free backtraces. */
    g_registry.row = frames > 0 && frames <= HS_MD_FREE_QUEUE_INLINE_FRAMES
                         ? HS_MD_FREE_QUEUE_INLINE_FRAMES
                         : 0;
    set_owned(g_registry.owned); /* the quota follows the new budget */
    /* The key's value is set without allocating while its index is low (< 32): created
     * here, at start-up, it is. Without a key, rings of exited threads are not reused. */
    g_registry.key_ok = pthread_key_create(&g_registry.exit_key, detach) == 0;
}

/* Gives the calling thread a ring: one that an exited thread left, else a new one. NULL
 * when memory is short. */
static struct ring *attach(void)
{
    hs_spin_lock(&g_registry.lock);
    struct ring *q = g_registry.rings;
    while (q && q->owned)
        q = q->next;
    if (!q) {
        q = hs_arena_calloc(&hs_md_arena, sizeof(*q));
        if (q) {
            q->row = g_registry.row;
            q->next = g_registry.rings;
            __atomic_store_n(&g_registry.rings, q, __ATOMIC_RELEASE);
        }
    }
    if (q) {
        q->owned = true;
        set_owned(g_registry.owned + 1);
        hs_spin_lock(&q->lock);
        if (q->count > 0) /* an orphan, adopted with its blocks */
            __atomic_store_n(&g_registry.orphans, g_registry.orphans - 1, __ATOMIC_RELAXED);
        hs_spin_unlock(&q->lock);
    }
    hs_spin_unlock(&g_registry.lock);
    if (!q) {
        static int warned;
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            hs_log("%s: not enough memory for free_track", hs_log_program_name());
        return NULL;
    }
    t_ring = q;
    /* For the exit notification only. Should setspecific allocate (a high key index), the
     * allocation goes straight to glibc. */
    if (g_registry.key_ok) {
        hs_md_in_shim++;
        pthread_setspecific(g_registry.exit_key, q);
        hs_md_in_shim--;
    }
    return q;
}

/* Blocks a ring may keep now: its share of the budget. */
static inline size_t quota(void)
{
    return __atomic_load_n(&g_registry.quota, __ATOMIC_RELAXED);
}

/* Makes room for one more block if the ring may hold it; ring lock held. Returns false
 * when the array is full and cannot grow (its quota is reached or memory is short). */
static bool grow(struct ring *q, size_t limit)
{
    if (q->count < q->capacity)
        return true;
    if (q->capacity >= limit)
        return false;
    size_t capacity = q->capacity ? q->capacity * 2 : FIRST_CAPACITY;
    if (capacity > g_registry.budget)
        capacity = g_registry.budget;
    struct freed *slots = hs_arena_calloc(&hs_md_arena, capacity * sizeof(*slots));
    uintptr_t *frames = q->row ? hs_arena_calloc(&hs_md_arena, capacity * q->row * sizeof(*frames))
                               : NULL;
    if (!slots || (q->row && !frames)) {
        if (slots)
            hs_arena_free(&hs_md_arena, slots, capacity * sizeof(*slots));
        return false;
    }
    for (size_t i = 0; i < q->count; i++) {
        size_t at = ring_index(q, i);
        slots[i] = q->slots[at];
        if (q->row)
            memcpy(frames + i * q->row, row_of(q, at), q->row * sizeof(*frames));
    }
    if (q->slots)
        hs_arena_free(&hs_md_arena, q->slots, q->capacity * sizeof(*slots));
    if (q->frames)
        hs_arena_free(&hs_md_arena, q->frames, q->capacity * q->row * sizeof(*frames));
    q->slots = slots;
    q->frames = frames;
    q->capacity = capacity;
    q->head = 0;
    return true;
}

/* Takes the oldest block out of the ring, with its frames, into *out; ring lock held. */
static void pop_oldest(struct ring *q, struct evicted *out)
{
    hs_assert(q->count > 0 && q->count <= q->capacity && q->head < q->capacity);
    out->f = q->slots[q->head];
    copy_row(out->frames, row_of(q, q->head), out->f.num_frames);
    q->head = ring_index(q, 1);
    q->count--;
}

static size_t checked_bytes(const struct freed *f)
{
    size_t limit = hs_md.cfg.fill_on_free_bytes;
    return f->usable < limit ? f->usable : limit;
}

/* Reports a block whose fill or tag changed after it was freed; frames: its free
 * backtrace's when f->num_frames says so. */
static void verify(const struct freed *f, const uintptr_t *frames)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    if (hs_md.header) {
        const struct hs_md_header *h = hs_md_header_of(f->ptr);
        if (h->tag != HS_MD_TAG_FREED) {
            hs_md_report_begin();
            hs_log("+++ ALLOCATION 0x%lx HAS CORRUPTED HEADER TAG 0x%x AFTER FREE",
                   (unsigned long)f->ptr, h->tag);
            hs_md_report_end();
            return;
        }
    }
    const uint8_t *p = f->ptr;
    size_t n = checked_bytes(f);
    if (__builtin_expect(hs_md_all_equal(p, n, cfg->fill_free_value), 1))
        return;
    size_t first_bad = hs_md_first_mismatch(p, n, cfg->fill_free_value);
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p USED AFTER FREE", f->ptr);
    for (size_t i = first_bad; i < n; i++)
        if (p[i] != cfg->fill_free_value)
            hs_log("  allocation[%zu] = 0x%02x (expected 0x%02x)", i, p[i], cfg->fill_free_value);
    if (f->num_frames) {
        hs_log("Backtrace at time of free:");
        hs_backtrace_log(frames, f->num_frames);
    } else if (f->bt) {
        hs_log("Backtrace at time of free:");
        hs_backtrace_log(f->bt->frames, f->bt->num_frames);
    }
    hs_md_report_end();
}

/* Checks a block leaving the queue and gives it back. */
static void retire(const struct evicted *e)
{
    verify(&e->f, e->frames);
    hs_md_backing_free(e->f.orig, e->f.bt);
    if (e->f.bt)
        hs_md_bt_release(e->f.bt);
}

/* One block of an exited thread's ring (the oldest there), into *out. The budget is shared
 * by the rings of live threads (quota); without this, the rings exited threads left would
 * keep up to their last quota each on top of it until a new thread adopts them. Draining
 * them one block per free keeps the whole within the budget but for a moment. */
static bool take_orphan_block(struct evicted *out)
{
    bool taken = false;
    hs_spin_lock(&g_registry.lock);
    for (struct ring *q = g_registry.rings; q && !taken; q = q->next) {
        if (q->owned)
            continue;
        hs_spin_lock(&q->lock);
        if (q->count > 0) {
            pop_oldest(q, out);
            taken = true;
            if (q->count == 0)
                __atomic_store_n(&g_registry.orphans, g_registry.orphans - 1, __ATOMIC_RELAXED);
        }
        hs_spin_unlock(&q->lock);
    }
    hs_spin_unlock(&g_registry.lock);
    return taken;
}

/* A backtrace deeper than the ring's rows, as a table record (NULL when out of memory). */
static struct hs_md_bt *record_of_frames(const uintptr_t *frames, size_t num_frames)
{
    struct hs_md_bt *bt = hs_md_bt_acquire(frames, num_frames);
    if (__builtin_expect(!bt, 0))
        hs_md_note_out_of_memory();
    return bt;
}

void hs_md_free_queue_push(void *ptr, void *orig, size_t usable, const uintptr_t *frames,
                           size_t num_frames, struct hs_md_bt *guarded_bt)
{
    struct hs_md_bt *bt = guarded_bt;
    struct ring *q = t_ring;
    if (__builtin_expect(!q, 0))
        q = attach();
    if (!q) {
        hs_md_backing_free(orig, bt);
        hs_md_bt_release(bt);
        return;
    }
    if (__builtin_expect(num_frames > q->row, 0)) { /* (row is fixed: no lock needed) */
        bt = record_of_frames(frames, num_frames);
        num_frames = 0;
    }
    struct evicted evicted[MAX_EVICT + 2];
    size_t n_evicted = 0;
    size_t limit = quota();
    hs_spin_lock(&q->lock);
    /* Over the quota (more threads share the budget now): shrink a little each time. */
    while (q->count >= limit && n_evicted < MAX_EVICT)
        pop_oldest(q, &evicted[n_evicted++]);
    if (!grow(q, limit)) {
        if (q->count == 0) { /* no memory for even one slot: the block goes back now */
            hs_spin_unlock(&q->lock);
            hs_md_backing_free(orig, bt);
            hs_md_bt_release(bt);
            return;
        }
        pop_oldest(q, &evicted[n_evicted++]); /* full: the oldest makes room */
    }
    hs_assert(q->count < q->capacity && q->head < q->capacity);
    hs_assert(!(num_frames && bt)); /* a free backtrace is a row or a record, never both */
    size_t at = ring_index(q, q->count);
    q->slots[at] = (struct freed){ptr, orig, usable, bt, (uint32_t)num_frames};
    if (num_frames)
        memcpy(row_of(q, at), frames, num_frames * sizeof(*frames));
    q->count++;
    /* The block the next free evicts (the oldest now) is read then, whole: its first lines
     * (glibc's chunk header among them) are fetched meanwhile, as fills of larger blocks
     * push them out of the first-level cache in between. A hint only: nothing is read. */
    const uint8_t *next = q->slots[q->head].ptr;
    __builtin_prefetch(next - 16);
    __builtin_prefetch(next + 48);
    hs_spin_unlock(&q->lock);

    if (__builtin_expect(__atomic_load_n(&g_registry.orphans, __ATOMIC_RELAXED) > 0, 0) &&
        take_orphan_block(&evicted[n_evicted]))
        n_evicted++;
    for (size_t i = 0; i < n_evicted; i++)
        retire(&evicted[i]);
}

bool hs_md_free_queue_find(const void *ptr, struct hs_md_bt **free_bt)
{
    for (struct ring *q = __atomic_load_n(&g_registry.rings, __ATOMIC_ACQUIRE); q; q = q->next) {
        hs_spin_lock(&q->lock);
        for (size_t i = 0; i < q->count; i++) {
            size_t at = ring_index(q, i);
            const struct freed *f = &q->slots[at];
            if (f->ptr == ptr) {
                size_t n = f->num_frames;
                uintptr_t frames[HS_MD_FREE_QUEUE_INLINE_FRAMES];
                copy_row(frames, row_of(q, at), n);
                *free_bt = n ? NULL : f->bt;
                hs_md_bt_ref(*free_bt);
                hs_spin_unlock(&q->lock);
                /* An error path: the ring's frames become a record for the report (none
                 * when memory is short: the report then goes without them). */
                if (n)
                    *free_bt = hs_md_bt_acquire(frames, n);
                return true;
            }
        }
        hs_spin_unlock(&q->lock);
    }
    return false;
}

void hs_md_free_queue_verify_all(void)
{
    for (struct ring *q = __atomic_load_n(&g_registry.rings, __ATOMIC_ACQUIRE); q; q = q->next) {
        hs_spin_lock(&q->lock);
        for (size_t i = 0; i < q->count; i++) {
            size_t at = ring_index(q, i);
            verify(&q->slots[at], row_of(q, at));
        }
        hs_spin_unlock(&q->lock);
    }
}

size_t hs_md_free_queue_count(void)
{
    size_t n = 0;
    for (struct ring *q = __atomic_load_n(&g_registry.rings, __ATOMIC_ACQUIRE); q; q = q->next) {
        hs_spin_lock(&q->lock);
        n += q->count;
        hs_spin_unlock(&q->lock);
    }
    return n;
}

void hs_md_free_queue_lock(void)
{
    hs_spin_lock(&g_registry.lock);
    for (struct ring *q = g_registry.rings; q; q = q->next)
        hs_spin_lock(&q->lock);
}

void hs_md_free_queue_unlock(void)
{
    for (struct ring *q = g_registry.rings; q; q = q->next)
        hs_spin_unlock(&q->lock);
    hs_spin_unlock(&g_registry.lock);
}

void hs_md_free_queue_unlock_in_child(void)
{
    /* The other threads are gone: their rings (and blocks) wait for the child's threads. */
    size_t owned = 0, orphans = 0;
    for (struct ring *q = g_registry.rings; q; q = q->next) {
        q->owned = q == t_ring;
        owned += q->owned;
        orphans += !q->owned && q->count > 0;
    }
    set_owned(owned);
    g_registry.orphans = orphans;
    hs_md_free_queue_unlock();
}
