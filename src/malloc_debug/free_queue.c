/* free_queue.c: free_track's ring of freed blocks (see free_queue.h). */
#include "free_queue.h"

#include "backtrace.h"
#include "byte_check.h"
#include "debug_state.h"
#include "header.h"
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

static struct {
    hs_spinlock lock;
    struct freed *ring; /* capacity slots; guarded by lock */
    size_t capacity;
    size_t head; /* oldest */
    size_t count;
} g_queue = {HS_SPINLOCK_INIT, NULL, 0, 0, 0};

bool hs_md_free_queue_init(size_t capacity)
{
    g_queue.ring = hs_arena_calloc(&hs_md_arena, capacity * sizeof(struct freed));
    g_queue.capacity = g_queue.ring ? capacity : 0;
    return g_queue.ring != NULL;
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
    hs_spin_lock(&g_queue.lock);
    if (g_queue.capacity == 0) {
        hs_spin_unlock(&g_queue.lock);
        __libc_free(orig);
        hs_md_bt_release(free_bt);
        return;
    }
    if (g_queue.count == g_queue.capacity) {
        evicted = g_queue.ring[g_queue.head];
        g_queue.head = (g_queue.head + 1) % g_queue.capacity;
        g_queue.count--;
        evict = true;
    }
    g_queue.ring[(g_queue.head + g_queue.count) % g_queue.capacity] =
        (struct freed){ptr, orig, usable, free_bt};
    g_queue.count++;
    hs_spin_unlock(&g_queue.lock);

    if (evict) {
        verify(&evicted);
        __libc_free(evicted.orig);
        hs_md_bt_release(evicted.bt);
    }
}

bool hs_md_free_queue_find(const void *ptr, struct hs_md_bt **free_bt)
{
    bool found = false;
    hs_spin_lock(&g_queue.lock);
    for (size_t i = 0; i < g_queue.count && !found; i++) {
        const struct freed *f = &g_queue.ring[(g_queue.head + i) % g_queue.capacity];
        if (f->ptr == ptr) {
            found = true;
            *free_bt = f->bt;
            hs_md_bt_ref(f->bt);
        }
    }
    hs_spin_unlock(&g_queue.lock);
    return found;
}

void hs_md_free_queue_verify_all(void)
{
    hs_spin_lock(&g_queue.lock);
    for (size_t i = 0; i < g_queue.count; i++)
        verify(&g_queue.ring[(g_queue.head + i) % g_queue.capacity]);
    hs_spin_unlock(&g_queue.lock);
}

void hs_md_free_queue_lock(void)
{
    hs_spin_lock(&g_queue.lock);
}

void hs_md_free_queue_unlock(void)
{
    hs_spin_unlock(&g_queue.lock);
}
