/* free_queue.c: free_track's rings of freed blocks (see free_queue.h).
 *
 * Up to 8 rings, each with its own lock, chosen by the block's address, so threads freeing
 * at the same time rarely meet; a block is always found in the ring its address picks. A
 * small free_track (under 32 blocks) keeps one ring and so an exact first-in, first-out
 * order; a larger one splits its N blocks evenly, and the order is first-in, first-out per
 * ring. */
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

#include <stdlib.h>
#include <string.h>

struct freed {
    void *ptr;
    void *orig;
    size_t usable;
    struct hs_md_bt *bt;
};

#define MAX_RINGS 8
#define MIN_PER_RING 16

struct ring {
    hs_spinlock lock;
    struct freed *slots; /* capacity slots; guarded by lock */
    size_t capacity;
    size_t head; /* oldest */
    size_t count;
} __attribute__((aligned(64)));

static struct ring g_rings[MAX_RINGS];
static size_t g_num_rings;

bool hs_md_free_queue_init(size_t capacity)
{
    size_t n = capacity / MIN_PER_RING;
    n = n < 1 ? 1 : n > MAX_RINGS ? MAX_RINGS : n;
    for (size_t i = 0; i < n; i++) {
        size_t c = capacity / n + (i < capacity % n);
        g_rings[i].slots = hs_arena_calloc(&hs_md_arena, c * sizeof(struct freed));
        if (!g_rings[i].slots)
            return false;
        g_rings[i].capacity = c;
    }
    g_num_rings = n;
    return true;
}

static struct ring *ring_of(const void *ptr)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr * 0x9e3779b97f4a7c15ull;
    return &g_rings[g_num_rings > 1 ? (h >> 32) % g_num_rings : 0];
}

static size_t checked_bytes(const struct freed *f)
{
    size_t limit = hs_md.cfg.fill_on_free_bytes;
    return f->usable < limit ? f->usable : limit;
}

/* Reports a block whose fill or tag changed after it was freed. */
static void verify(const struct freed *f)
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
    size_t first_bad = hs_md_first_mismatch(p, n, cfg->fill_free_value);
    if (first_bad == n)
        return;
    hs_md_report_begin();
    hs_log("+++ ALLOCATION %p USED AFTER FREE", f->ptr);
    for (size_t i = first_bad; i < n; i++)
        if (p[i] != cfg->fill_free_value)
            hs_log("  allocation[%zu] = 0x%02x (expected 0x%02x)", i, p[i], cfg->fill_free_value);
    if (f->bt) {
        hs_log("Backtrace at time of free:");
        hs_backtrace_log(f->bt->frames, f->bt->num_frames);
    }
    hs_md_report_end();
}

void hs_md_free_queue_push(void *ptr, void *orig, size_t usable, struct hs_md_bt *free_bt)
{
    struct freed evicted = {0};
    bool evict = false;
    struct ring *q = ring_of(ptr);
    hs_spin_lock(&q->lock);
    if (q->capacity == 0) {
        hs_spin_unlock(&q->lock);
        hs_md_backing_free(orig, free_bt);
        hs_md_bt_release(free_bt);
        return;
    }
    hs_assert(q->count <= q->capacity && q->head < q->capacity);
    if (q->count == q->capacity) {
        evicted = q->slots[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        evict = true;
    }
    q->slots[(q->head + q->count) % q->capacity] = (struct freed){ptr, orig, usable, free_bt};
    q->count++;
    hs_spin_unlock(&q->lock);

    if (evict) {
        verify(&evicted);
        hs_md_backing_free(evicted.orig, evicted.bt);
        hs_md_bt_release(evicted.bt);
    }
}

bool hs_md_free_queue_find(const void *ptr, struct hs_md_bt **free_bt)
{
    bool found = false;
    struct ring *q = ring_of(ptr);
    hs_spin_lock(&q->lock);
    for (size_t i = 0; i < q->count && !found; i++) {
        const struct freed *f = &q->slots[(q->head + i) % q->capacity];
        if (f->ptr == ptr) {
            found = true;
            *free_bt = f->bt;
            hs_md_bt_ref(f->bt);
        }
    }
    hs_spin_unlock(&q->lock);
    return found;
}

void hs_md_free_queue_verify_all(void)
{
    for (size_t r = 0; r < g_num_rings; r++) {
        struct ring *q = &g_rings[r];
        hs_spin_lock(&q->lock);
        for (size_t i = 0; i < q->count; i++)
            verify(&q->slots[(q->head + i) % q->capacity]);
        hs_spin_unlock(&q->lock);
    }
}

void hs_md_free_queue_lock(void)
{
    for (int r = 0; r < MAX_RINGS; r++)
        hs_spin_lock(&g_rings[r].lock);
}

void hs_md_free_queue_unlock(void)
{
    for (int r = MAX_RINGS - 1; r >= 0; r--)
        hs_spin_unlock(&g_rings[r].lock);
}
