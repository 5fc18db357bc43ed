/* sample_guard.c: sample_guard's countdown and pool of guarded slots (see sample_guard.h).
 *
 * Layout of the pool, reserved PROT_NONE at start:
 *     | guard | slot 0 | guard | slot 1 | ... | slot n-1 | guard |
 * each guard one page, each slot HS_MD_SAMPLE_SLOT_PAGES pages. A block makes only the pages
 * it covers readable and writable; the rest of its slot stays PROT_NONE, so an overflow that
 * leaves its page faults even before it reaches the guard page.
 *
 * Records: one per slot, in memory of its own (never the pool's pages). A freed slot keeps its
 * record, with both backtraces, until the slot is used again: the free slots are a first-in
 * first-out ring, so the slot freed last is reused last.
 *
 * The countdown is per thread (no shared counter to contend on), drawn from a per-thread
 * xorshift generator seeded from the thread id and the clock.
 */
#define _GNU_SOURCE
#include "sample_guard.h"

#include "clock.h"
#include "debug_state.h"
#include "guard_report.h"
#include "sample_budget.h"
#include "spinlock.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread int hs_md_sample_left __attribute__((tls_model("initial-exec")));
static __thread uint32_t t_rng __attribute__((tls_model("initial-exec")));

/* The default rate's budget (sample_budget.h), per thread: the current window's start and the
 * time spent in sampled work since, and the multiplier of the drawn countdowns. */
static __thread struct {
    uint64_t window_start, spent_ns;
    uint32_t scale;
} t_budget __attribute__((tls_model("initial-exec")));

/* The multiplier a thread settled on last: a new thread starts from it rather than from 1, so
 * that a program starting threads does not pay the full rate in each one's first window.
 * Written only when a window changes a thread's multiplier. */
static uint32_t g_scale_hint;

/* Read by every free (the range check): on a cache line of its own, never written after
 * start (the pool's lock and ring, written at each sample, live elsewhere). */
struct hs_md_addr_range hs_md_sample_range __attribute__((aligned(64)));

static struct {
    size_t nslots;
    size_t slot_bytes; /* data pages of a slot */
    size_t stride;     /* a slot and the guard page after it */
    uint32_t rate;     /* sample_guard=N */
    bool adaptive;     /* the default rate: kept within the budget */
    int side;          /* enum hs_md_guard_side */
    uint8_t slack_value;
    struct hs_md_gblock *recs; /* nslots records */
    hs_spinlock lock;
    uint32_t *ring; /* free slots, oldest first; guarded by lock */
    size_t ring_head, ring_count;
} g_sp;

/* xorshift32: plenty for spacing samples; never 0 once seeded. */
static uint32_t next_random(void)
{
    uint32_t x = t_rng;
    if (x == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint32_t)syscall(SYS_gettid) * 2654435761u ^ (uint32_t)ts.tv_nsec ^
            (uint32_t)(uintptr_t)&t_rng;
        if (x == 0)
            x = 0x9e3779b9u;
    }
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t_rng = x;
    return x;
}

/* Allocations until the next sample: uniform in 1..2N-1, so one in N on average (N times
 * the budget's multiplier for the default rate). */
static int draw_countdown(void)
{
    uint32_t span = g_sp.rate > 0 ? 2 * g_sp.rate - 1 : 1;
    uint64_t n = 1 + next_random() % span;
    if (g_sp.adaptive && t_budget.scale > 1)
        n *= t_budget.scale;
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* At a sample: closes the budget's window when it is over and sets the next multiplier. */
static void update_budget(void)
{
    uint64_t now = hs_monotonic_ns();
    if (t_budget.window_start == 0) {
        uint32_t hint = __atomic_load_n(&g_scale_hint, __ATOMIC_RELAXED);
        t_budget.window_start = now;
        t_budget.scale = hint > 1 ? hint : 1;
        return;
    }
    uint64_t elapsed = now - t_budget.window_start;
    if (elapsed < HS_MD_SAMPLE_WINDOW_NS)
        return;
    uint32_t scale = hs_md_sample_next_scale(t_budget.scale, t_budget.spent_ns, elapsed);
    if (scale != t_budget.scale)
        __atomic_store_n(&g_scale_hint, scale, __ATOMIC_RELAXED);
    t_budget.scale = scale;
    t_budget.window_start = now;
    t_budget.spent_ns = 0;
}

uint64_t hs_md_sample_clock(void)
{
    return g_sp.adaptive ? hs_monotonic_ns() : 0;
}

void hs_md_sample_charge(uint64_t start)
{
    if (start != 0)
        t_budget.spent_ns += hs_monotonic_ns() - start;
}

bool hs_md_sample_due(void)
{
    if (t_rng != 0 && hs_md_sample_left > 0)
        return false; /* a call that did not count down (the process's first) */
    if (g_sp.adaptive)
        update_budget();
    if (t_rng == 0) {
        /* The thread's first allocation: set the countdown up and count this one. */
        hs_md_sample_left = draw_countdown();
        if (--hs_md_sample_left > 0)
            return false;
    }
    hs_md_sample_left = draw_countdown();
    return true;
}

bool hs_md_sample_guard_init(const struct hs_md_config *cfg)
{
    g_sp.nslots = cfg->sample_guard_slots;
    g_sp.slot_bytes = (size_t)HS_MD_SAMPLE_SLOT_PAGES * HS_MD_PAGE;
    g_sp.stride = g_sp.slot_bytes + HS_MD_PAGE;
    g_sp.rate = (uint32_t)cfg->sample_guard_rate;
    g_sp.adaptive = cfg->sample_guard_adaptive;
    g_sp.side = (int)cfg->sample_guard_side;
    g_sp.slack_value = cfg->rear_guard_value;

    size_t pool = HS_MD_PAGE + g_sp.nslots * g_sp.stride;
    size_t recs_bytes = hs_md_page_up(g_sp.nslots * sizeof(struct hs_md_gblock));
    size_t ring_bytes = hs_md_page_up(g_sp.nslots * sizeof(uint32_t));
    void *p = mmap(NULL, pool, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    void *meta = mmap(NULL, recs_bytes + ring_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (meta == MAP_FAILED) {
        munmap(p, pool);
        return false;
    }
    g_sp.recs = meta;
    g_sp.ring = (uint32_t *)((uint8_t *)meta + recs_bytes);
    for (size_t i = 0; i < g_sp.nslots; i++)
        g_sp.ring[i] = (uint32_t)i;
    g_sp.ring_count = g_sp.nslots;
    hs_md_sample_range.base = (uintptr_t)p;
    hs_md_sample_range.size = pool;
    return true;
}

static uintptr_t slot_start(size_t i)
{
    return hs_md_sample_range.base + HS_MD_PAGE + i * g_sp.stride;
}

/* Takes the oldest free slot that is not retired. */
static bool take_slot(size_t *slot)
{
    bool ok = false;
    hs_spin_lock(&g_sp.lock);
    while (g_sp.ring_count > 0 && !ok) {
        size_t i = g_sp.ring[g_sp.ring_head];
        g_sp.ring_head = (g_sp.ring_head + 1) % g_sp.nslots;
        g_sp.ring_count--;
        if (!__atomic_load_n(&g_sp.recs[i].retire, __ATOMIC_RELAXED)) {
            *slot = i;
            ok = true;
        }
    }
    hs_spin_unlock(&g_sp.lock);
    return ok;
}

static void put_slot(size_t i)
{
    hs_spin_lock(&g_sp.lock);
    g_sp.ring[(g_sp.ring_head + g_sp.ring_count) % g_sp.nslots] = (uint32_t)i;
    g_sp.ring_count++;
    hs_spin_unlock(&g_sp.lock);
}

static void *sample_alloc(size_t size, size_t align, size_t align_offset, bool zero,
                          struct hs_md_bt *alloc_bt);

void *hs_md_sample_guard_alloc(size_t size, size_t align, size_t align_offset, bool zero,
                               struct hs_md_bt *alloc_bt)
{
    uint64_t start = hs_md_sample_clock();
    void *p = sample_alloc(size, align, align_offset, zero, alloc_bt);
    hs_md_sample_charge(start);
    return p;
}

static void *sample_alloc(size_t size, size_t align, size_t align_offset, bool zero,
                          struct hs_md_bt *alloc_bt)
{
    if (size > g_sp.slot_bytes || align > HS_MD_PAGE || hs_md_sample_range.size == 0)
        return NULL;
    bool front = g_sp.side == HS_MD_SIDE_FRONT ||
                 (g_sp.side == HS_MD_SIDE_RANDOM && (next_random() & 0x100) != 0);
    uintptr_t lo = 0;
    size_t slot;
    if (!take_slot(&slot))
        return NULL;
    lo = slot_start(slot);
    uintptr_t b = hs_md_gblock_place(lo, lo + g_sp.slot_bytes, size, align, align_offset, front);
    if (b == 0) {
        put_slot(slot);
        return NULL;
    }
    struct hs_md_gblock *g = &g_sp.recs[slot];
    uintptr_t data = hs_md_page_down(b), data_end = hs_md_page_up(b + size);
    if (mprotect((void *)data, data_end - data, PROT_READ | PROT_WRITE) != 0) {
        put_slot(slot);
        return NULL;
    }
    /* The slot's previous block is forgotten only now that the slot has a new one. */
    struct hs_md_bt *old_alloc = g->alloc_bt, *old_free = g->free_bt;
    __atomic_store_n(&g->state, HS_MD_GB_EMPTY, __ATOMIC_RELEASE);
    hs_md_gblock_start(g, b, size, data, data_end, alloc_bt);
    if (zero)
        memset((void *)b, 0, size);
    hs_md_gblock_fill_slack(g, g_sp.slack_value);
    __atomic_store_n(&g->state, HS_MD_GB_LIVE, __ATOMIC_RELEASE);
    hs_md_bt_release(old_alloc);
    hs_md_bt_release(old_free);
    return (void *)b;
}

void hs_md_sample_guard_free(struct hs_md_gblock *g, struct hs_md_bt *free_bt)
{
    uint64_t start = hs_md_sample_clock();
    if (hs_md_gblock_slack_mismatch(g, g_sp.slack_value) !=
        hs_md_gb_data_end(g) - (hs_md_gb_block(g) + g->block_size))
        hs_md_guard_report_slack(g, g_sp.slack_value);
    bool retire = __atomic_load_n(&g->retire, __ATOMIC_RELAXED);
    /* A retired slot (sample_guard_recover) keeps its pages as they are: it was reported. */
    if (!retire) {
        uint64_t flush = hs_md_sample_clock();
        mprotect((void *)hs_md_gb_data(g), hs_md_gb_data_end(g) - hs_md_gb_data(g), PROT_NONE);
        /* Charged twice: the TLB flush interrupts the other CPUs running this process too. */
        hs_md_sample_charge(flush);
    }
    g->free_bt = free_bt;
    __atomic_store_n(&g->state, retire ? HS_MD_GB_RETIRED : HS_MD_GB_FREED, __ATOMIC_RELEASE);
    if (!retire)
        put_slot((size_t)(g - g_sp.recs));
    hs_md_sample_charge(start);
}

/* Slot index and position of a in the pool: *in_slot is false for a guard page, whose slot
 * is the one after it (n for the last guard). Returns false outside the pool. */
static bool position(uintptr_t a, size_t *slot, bool *in_slot)
{
    if (!hs_md_sample_guard_owns(a))
        return false;
    size_t off = a - hs_md_sample_range.base;
    if (off < HS_MD_PAGE) {
        *slot = 0;
        *in_slot = false;
        return true;
    }
    off -= HS_MD_PAGE;
    *slot = off / g_sp.stride;
    *in_slot = off % g_sp.stride < g_sp.slot_bytes;
    if (!*in_slot)
        (*slot)++;
    return true;
}

struct hs_md_gblock *hs_md_sample_guard_record(uintptr_t a)
{
    size_t slot;
    bool in_slot;
    if (!position(a, &slot, &in_slot) || !in_slot)
        return NULL;
    return &g_sp.recs[slot];
}

size_t hs_md_sample_guard_nearby(uintptr_t a, struct hs_md_gblock **out)
{
    size_t slot, n = 0;
    bool in_slot;
    if (!position(a, &slot, &in_slot))
        return 0;
    /* In a slot: it and its neighbours; in a guard page: the slots on both sides. */
    size_t first = slot > 0 ? slot - 1 : 0;
    size_t last = in_slot ? slot + 1 : slot;
    for (size_t i = first; i <= last && i < g_sp.nslots; i++)
        if (__atomic_load_n(&g_sp.recs[i].state, __ATOMIC_ACQUIRE) != HS_MD_GB_EMPTY)
            out[n++] = &g_sp.recs[i];
    return n;
}

static void retire_slot(size_t i)
{
    if (i >= g_sp.nslots)
        return;
    struct hs_md_gblock *g = &g_sp.recs[i];
    __atomic_store_n(&g->retire, 1, __ATOMIC_RELAXED);
    int freed = HS_MD_GB_FREED;
    /* A freed slot waits in the ring: take_slot skips it from now on. */
    __atomic_compare_exchange_n(&g->state, &freed, HS_MD_GB_RETIRED, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_RELAXED);
}

bool hs_md_sample_guard_recover(uintptr_t a)
{
    size_t slot;
    bool in_slot;
    if (!position(a, &slot, &in_slot))
        return false;
    if (in_slot) {
        retire_slot(slot);
    } else { /* the guard page between slot - 1 and slot protected both */
        if (slot > 0)
            retire_slot(slot - 1);
        retire_slot(slot);
    }
    return mprotect((void *)hs_md_page_down(a), HS_MD_PAGE, PROT_READ | PROT_WRITE) == 0;
}

void hs_md_sample_guard_lock(void)
{
    hs_spin_lock(&g_sp.lock);
}

void hs_md_sample_guard_unlock(void)
{
    hs_spin_unlock(&g_sp.lock);
}
