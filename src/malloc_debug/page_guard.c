/* page_guard.c: page_guard's reservation, runs and quarantine (see page_guard.h).
 *
 * Layout. One reservation of PROT_NONE address space (MAP_NORESERVE: it costs no memory) is
 * split into regions of equal size, one per run size: region c holds runs of 2^(c+1) pages,
 * each aligned to its size. A block takes pages inside one run but never the run's last page
 * (rear) or its first page (front), so the page after a rear block (before a front one) is
 * PROT_NONE whatever the neighbouring runs hold. A block goes to the smallest run it fits;
 * the pages of a run it does not cover stay PROT_NONE, so a larger run costs address space,
 * not memory. From an address, the region, the run and its record are a subtraction and two
 * shifts away (free, the fault handler).
 *
 * Records: one per run, in an array per region reserved PROT_NONE and made writable 64 KiB
 * at a time as runs are first used (nothing is committed for runs never used).
 *
 * Free: the block's pages are replaced by fresh PROT_NONE ones (one mmap MAP_FIXED, so the
 * memory goes back to the kernel at once), the record keeps both backtraces, and the run
 * joins the quarantine, a first-in first-out list bounded by the bytes of the pages it holds.
 * Runs leaving the quarantine go to their region's free list and are reused before fresh
 * runs. A block's pages are always fresh, so every block starts zeroed.
 */
#define _GNU_SOURCE
#include "page_guard.h"

#include "debug_state.h"
#include "guard_report.h"
#include "log.h"
#include "spinlock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG_MAX_CLASSES 18      /* runs of 2 pages up to 2^18 pages (1 GiB) */
#define PG_REGION_MAX_SHIFT 34 /* 16 GiB of address space per run size, at most */
#define PG_REGION_MIN_SHIFT 24 /* 16 MiB, at least (ulimit -v) */
#define PG_MIN_RUNS_SHIFT 2    /* a region holds at least 4 runs of its size */
#define PG_RECORD_CHUNK (64 * 1024)
/* Mappings left to the program itself when the budget of live blocks is set from
 * vm.max_map_count (thread stacks, libraries, glibc's mmapped chunks). */
#define PG_MAP_HEADROOM 8192
#define PG_DEFAULT_MAX_MAP_COUNT 65530

struct pg_class {
    hs_spinlock lock;
    uintptr_t base;            /* the region */
    unsigned shift;            /* log2 of the run size in bytes */
    size_t nruns;              /* runs in the region */
    size_t used;               /* runs handed out at least once; guarded by lock */
    uint32_t free_head;        /* runs back from the quarantine (index + 1); guarded by lock */
    struct hs_md_gblock *recs; /* nruns records, reserved */
    size_t recs_bytes;         /* reserved bytes of recs */
    size_t committed_bytes;    /* bytes of recs made writable; guarded by lock */
    size_t committed;          /* records readable (atomic: the fault handler reads it) */
} __attribute__((aligned(64)));

static struct {
    uintptr_t base, end; /* the reservation; 0, 0 when page_guard is off */
    unsigned region_shift;
    unsigned nclasses;
    bool front;
    uint8_t slack_value;
    size_t live;     /* live blocks (atomic) */
    size_t live_max; /* budget from vm.max_map_count (atomic: lowered on ENOMEM) */
    struct pg_class classes[PG_MAX_CLASSES];
    hs_spinlock qlock;
    struct hs_md_gblock *qhead, *qtail; /* the quarantine, oldest first; guarded by qlock */
    size_t qbytes, qlimit;              /* guarded by qlock */
    int noted_budget, noted_size, noted_space;
} g_pg;

struct hs_md_addr_range hs_md_page_guard_range;

/* vm.max_map_count, read without allocating (this runs inside the first malloc). */
static size_t read_max_map_count(void)
{
    char buf[32];
    int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return PG_DEFAULT_MAX_MAP_COUNT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    size_t v = 0;
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = v * 10 + (size_t)(buf[i] - '0');
    return v > 0 ? v : PG_DEFAULT_MAX_MAP_COUNT;
}

static void *reserve_none(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unreserve_all(void)
{
    for (unsigned c = 0; c < g_pg.nclasses; c++)
        if (g_pg.classes[c].recs)
            munmap(g_pg.classes[c].recs, g_pg.classes[c].recs_bytes);
    if (g_pg.end > g_pg.base)
        munmap((void *)g_pg.base, g_pg.end - g_pg.base);
    memset(g_pg.classes, 0, sizeof(g_pg.classes));
    g_pg.base = g_pg.end = 0;
    hs_md_page_guard_range = (struct hs_md_addr_range){0, 0};
    g_pg.nclasses = 0;
}

/* Reserves nclasses regions of 2^shift bytes, aligned to 2^shift, and their record arrays. */
static bool reserve(unsigned shift, unsigned nclasses)
{
    size_t region = (size_t)1 << shift;
    size_t total = region * nclasses;
    uint8_t *p = reserve_none(total + region);
    if (!p)
        return false;
    uintptr_t start = ((uintptr_t)p + region - 1) & ~(uintptr_t)(region - 1);
    if (start > (uintptr_t)p)
        munmap(p, start - (uintptr_t)p);
    munmap((void *)(start + total), (uintptr_t)p + region - start);
    g_pg.base = start;
    g_pg.end = start + total;
    hs_md_page_guard_range = (struct hs_md_addr_range){start, total};
    g_pg.region_shift = shift;
    g_pg.nclasses = nclasses;
    for (unsigned c = 0; c < nclasses; c++) {
        struct pg_class *pc = &g_pg.classes[c];
        pc->base = start + (size_t)c * region;
        pc->shift = c + 1 + 12;
        pc->nruns = region >> pc->shift;
        pc->recs_bytes = hs_md_page_up(pc->nruns * sizeof(struct hs_md_gblock));
        pc->recs = reserve_none(pc->recs_bytes);
        if (!pc->recs) {
            unreserve_all();
            return false;
        }
    }
    return true;
}

bool hs_md_page_guard_init(const struct hs_md_config *cfg)
{
    g_pg.front = cfg->page_guard_side == HS_MD_SIDE_FRONT;
    g_pg.slack_value = cfg->rear_guard_value;
    g_pg.qlimit = cfg->page_guard_quarantine_mib << 20;
    size_t maps = read_max_map_count();
    g_pg.live_max = maps > 2 * PG_MAP_HEADROOM ? (maps - PG_MAP_HEADROOM) / 2 : maps / 4;
    /* Smaller reservations when the address space is limited (ulimit -v). */
    for (unsigned shift = PG_REGION_MAX_SHIFT; shift >= PG_REGION_MIN_SHIFT; shift--) {
        unsigned n = shift - 12 - PG_MIN_RUNS_SHIFT;
        if (reserve(shift, n > PG_MAX_CLASSES ? PG_MAX_CLASSES : n))
            return true;
    }
    return false;
}

/* Makes records [0, want) readable; the caller holds pc->lock. */
static bool commit_records(struct pg_class *pc, size_t want)
{
    while (pc->committed < want) {
        size_t next = pc->committed_bytes + PG_RECORD_CHUNK;
        if (next > pc->recs_bytes)
            next = pc->recs_bytes;
        if (next == pc->committed_bytes ||
            mprotect((uint8_t *)pc->recs + pc->committed_bytes, next - pc->committed_bytes,
                     PROT_READ | PROT_WRITE) != 0)
            return false;
        pc->committed_bytes = next;
        __atomic_store_n(&pc->committed, next / sizeof(struct hs_md_gblock), __ATOMIC_RELEASE);
    }
    return true;
}

static bool take_run(struct pg_class *pc, size_t *run)
{
    bool ok = true;
    hs_spin_lock(&pc->lock);
    if (pc->free_head != 0) {
        *run = pc->free_head - 1;
        pc->free_head = pc->recs[*run].next_free;
    } else if (pc->used < pc->nruns && commit_records(pc, pc->used + 1)) {
        *run = pc->used++;
    } else {
        ok = false;
    }
    hs_spin_unlock(&pc->lock);
    return ok;
}

static void put_run(struct pg_class *pc, size_t run)
{
    hs_spin_lock(&pc->lock);
    pc->recs[run].next_free = pc->free_head;
    pc->free_head = (uint32_t)(run + 1);
    hs_spin_unlock(&pc->lock);
}

/* Logs one of the "not guarded" notes once per process. */
static void note_once(int *noted, const char *what, size_t value)
{
    if (__atomic_exchange_n(noted, 1, __ATOMIC_RELAXED))
        return;
    const char *prog = hs_log_program_name();
    if (noted == &g_pg.noted_budget)
        hs_log("%s: page_guard: %zu blocks are live on pages of their own, the most "
               "vm.max_map_count allows with room left for the program's own mappings; new "
               "blocks come from glibc without guard pages until some are freed",
               prog, value);
    else
        hs_log("%s: page_guard: %s %zu pages come from glibc without guard pages", prog, what,
               value);
}

/* The smallest run size (region) whose run less its guard page holds `pages` pages. */
static unsigned class_for(size_t pages)
{
    unsigned c = 0;
    while (c < g_pg.nclasses && ((size_t)2 << c) - 1 < pages)
        c++;
    return c;
}

void *hs_md_page_guard_alloc(size_t size, size_t align, size_t align_offset,
                             struct hs_md_bt *alloc_bt)
{
    size_t live = __atomic_load_n(&g_pg.live, __ATOMIC_RELAXED);
    if (live >= __atomic_load_n(&g_pg.live_max, __ATOMIC_RELAXED)) {
        note_once(&g_pg.noted_budget, NULL, live);
        return NULL;
    }
    /* Bytes lost to alignment between the block and its guard page (see
     * hs_md_gblock_place); a run's start is aligned to the run's size. */
    size_t waste = align <= HS_MD_PAGE
                       ? (g_pg.front ? 0 - align_offset : align_offset - size) & (align - 1)
                       : align - 1;
    size_t need;
    if (__builtin_add_overflow(size, waste, &need) || need > SIZE_MAX - HS_MD_PAGE)
        return NULL;
    size_t pages = need == 0 ? 1 : (need + HS_MD_PAGE - 1) / HS_MD_PAGE;
    unsigned c = class_for(pages);
    if (c >= g_pg.nclasses) {
        note_once(&g_pg.noted_size, "blocks over", ((size_t)2 << (g_pg.nclasses - 1)) - 1);
        return NULL;
    }
    struct pg_class *pc = &g_pg.classes[c];
    size_t run;
    if (!take_run(pc, &run)) {
        note_once(&g_pg.noted_space, "no address space is left for blocks of up to",
                  ((size_t)2 << c) - 1);
        return NULL;
    }
    uintptr_t r = pc->base + (run << pc->shift);
    uintptr_t lo = r + (g_pg.front ? HS_MD_PAGE : 0);
    uintptr_t hi = r + ((size_t)1 << pc->shift) - (g_pg.front ? 0 : HS_MD_PAGE);
    uintptr_t b = hs_md_gblock_place(lo, hi, size, align, align_offset, g_pg.front);
    if (b == 0) {
        put_run(pc, run);
        return NULL;
    }
    uintptr_t data = hs_md_page_down(b), data_end = hs_md_page_up(b + size);
    if (mprotect((void *)data, data_end - data, PROT_READ | PROT_WRITE) != 0) {
        int err = errno;
        put_run(pc, run);
        if (err == ENOMEM) { /* the kernel's mapping limit: stay below what we have now */
            __atomic_store_n(&g_pg.live_max, live, __ATOMIC_RELAXED);
            note_once(&g_pg.noted_budget, NULL, live);
        }
        return NULL;
    }
    struct hs_md_gblock *g = &pc->recs[run];
    hs_md_gblock_start(g, b, size, data, data_end, alloc_bt);
    g->qnext = NULL;
    g->retire = 0;
    hs_md_gblock_fill_slack(g, g_pg.slack_value);
    __atomic_fetch_add(&g_pg.live, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&g->state, HS_MD_GB_LIVE, __ATOMIC_RELEASE);
    return (void *)b;
}

/* A run that left the quarantine: its record forgets the block, the run can be reused. */
static void recycle(struct hs_md_gblock *g)
{
    struct hs_md_bt *alloc_bt = g->alloc_bt, *free_bt = g->free_bt;
    size_t c = (hs_md_gb_data(g) - g_pg.base) >> g_pg.region_shift;
    struct pg_class *pc = &g_pg.classes[c];
    __atomic_store_n(&g->state, HS_MD_GB_EMPTY, __ATOMIC_RELEASE);
    g->alloc_bt = g->free_bt = NULL;
    hs_md_bt_release(alloc_bt);
    hs_md_bt_release(free_bt);
    put_run(pc, (size_t)(g - pc->recs));
}

static void quarantine(struct hs_md_gblock *g)
{
    struct hs_md_gblock *evicted = NULL, **tail = &evicted;
    hs_spin_lock(&g_pg.qlock);
    g->qnext = NULL;
    if (g_pg.qtail)
        g_pg.qtail->qnext = g;
    else
        g_pg.qhead = g;
    g_pg.qtail = g;
    g_pg.qbytes += hs_md_gb_data_end(g) - hs_md_gb_data(g);
    while (g_pg.qbytes > g_pg.qlimit && g_pg.qhead) {
        struct hs_md_gblock *old = g_pg.qhead;
        g_pg.qhead = old->qnext;
        if (!g_pg.qhead)
            g_pg.qtail = NULL;
        g_pg.qbytes -= hs_md_gb_data_end(old) - hs_md_gb_data(old);
        old->qnext = NULL;
        *tail = old;
        tail = &old->qnext;
    }
    hs_spin_unlock(&g_pg.qlock);
    while (evicted) {
        struct hs_md_gblock *old = evicted;
        evicted = old->qnext;
        recycle(old);
    }
}

void hs_md_page_guard_free(struct hs_md_gblock *g, struct hs_md_bt *free_bt)
{
    if (hs_md_gblock_slack_mismatch(g, g_pg.slack_value) !=
        hs_md_gb_data_end(g) - (hs_md_gb_block(g) + g->block_size))
        hs_md_guard_report_slack(g, g_pg.slack_value);
    void *pages = (void *)hs_md_gb_data(g);
    size_t len = hs_md_gb_data_end(g) - hs_md_gb_data(g);
    /* Fresh PROT_NONE pages in place of the block's: one system call, memory returned. */
    if (mmap(pages, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
             0) == MAP_FAILED) {
        mprotect(pages, len, PROT_NONE);
        madvise(pages, len, MADV_DONTNEED);
    }
    g->free_bt = free_bt;
    __atomic_store_n(&g->state, HS_MD_GB_FREED, __ATOMIC_RELEASE);
    __atomic_fetch_sub(&g_pg.live, 1, __ATOMIC_RELAXED);
    quarantine(g);
}

/* The region, run and readable-record count for an address of the reservation. */
static struct pg_class *locate(uintptr_t a, size_t *run, size_t *ready)
{
    if (!hs_md_page_guard_owns(a))
        return NULL;
    struct pg_class *pc = &g_pg.classes[(a - g_pg.base) >> g_pg.region_shift];
    *run = (a - pc->base) >> pc->shift;
    *ready = __atomic_load_n(&pc->committed, __ATOMIC_ACQUIRE);
    return pc;
}

struct hs_md_gblock *hs_md_page_guard_record(uintptr_t a)
{
    size_t run, ready;
    struct pg_class *pc = locate(a, &run, &ready);
    return pc && run < ready ? &pc->recs[run] : NULL;
}

size_t hs_md_page_guard_nearby(uintptr_t a, struct hs_md_gblock **out)
{
    size_t run, ready, n = 0;
    struct pg_class *pc = locate(a, &run, &ready);
    if (!pc)
        return 0;
    for (size_t r = run > 0 ? run - 1 : 0; r <= run + 1 && r < ready; r++)
        if (__atomic_load_n(&pc->recs[r].state, __ATOMIC_ACQUIRE) != HS_MD_GB_EMPTY)
            out[n++] = &pc->recs[r];
    return n;
}

void hs_md_page_guard_stats(size_t *live, size_t *quarantined_bytes)
{
    *live = __atomic_load_n(&g_pg.live, __ATOMIC_RELAXED);
    hs_spin_lock(&g_pg.qlock);
    *quarantined_bytes = g_pg.qbytes;
    hs_spin_unlock(&g_pg.qlock);
}

void hs_md_page_guard_lock(void)
{
    hs_spin_lock(&g_pg.qlock);
    for (unsigned c = 0; c < PG_MAX_CLASSES; c++)
        hs_spin_lock(&g_pg.classes[c].lock);
}

void hs_md_page_guard_unlock(void)
{
    for (unsigned c = PG_MAX_CLASSES; c-- > 0;)
        hs_spin_unlock(&g_pg.classes[c].lock);
    hs_spin_unlock(&g_pg.qlock);
}
