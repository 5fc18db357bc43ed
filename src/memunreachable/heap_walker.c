/* heap_walker.c: allocations, roots, marking and fault-tolerant reads (see heap_walker.h).
 *
 * Invariants after hs_mu_heap_walker_finish:
 *  - allocs[] is sorted by begin, ranges do not overlap, so ends are ascending too;
 *  - every page where an allocation begins has an entry whose run allocs[base, base + count)
 *    is exactly the allocations beginning in it; base is the number of allocations beginning
 *    in lower pages; with a slot array, slots[k] is the first index of the run beginning in
 *    slot k or above and the last entry is base + count;
 *  - every page that an allocation covering at most HS_MU_BIG_PAGES pages runs into has an
 *    entry (an empty run when nothing begins there, whose base - 1 is that allocation); the
 *    allocations covering more pages are exactly the ones listed in big[], and no entry is
 *    made for the pages they cover;
 *  - bit i of marked[] is set iff i was marked; then it is pending (bit or stack entry)
 *    until scanned, and scanned exactly once.
 *
 * Cost of marking: the scan loop is one load, one subtract and one predicted compare per word
 * outside the heap's span; a word inside it is queued and looked up in a batch (page table
 * probe, slot bounds, binary search over a handful of allocations, mark byte).
 * Measured by bench/unreachable_walk_bench.c (10^6 blocks of 1000 bytes, 1 GB, held by a root
 * array in random order, on a 2-vCPU AMD EPYC VM): marking 75-110 ms, ~10 GB/s, against
 * ~690 ms for a depth-first walk with unbatched lookups.
 * The page table's window hash stays specialised (not hash_table.h): the shared table cost
 * +8% instructions in the batch lookup (see "The page table" below for the figures).
 */
#include "heap_walker.h"

#include "hs_assert.h"
#include "log.h"
#include "range_lookup.h"
#include "run_order.h"
#include "sort.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- Fault guard ------------------------------------------------------------------------ */

/* Process-global: the sweeper is single-threaded. The handler reads first_page, last_page and
 * active; the reading code writes them around each read, with signal fences so the compiler
 * keeps the order. */
static struct {
    volatile uintptr_t first_page, last_page;
    volatile int active;
    volatile size_t skipped;
    volatile int logged;
    uintptr_t page_size;
    bool installed;
    struct sigaction old_segv, old_bus;
    sigset_t old_mask;
} g_guard;

static void guard_restore(int sig)
{
    sigaction(sig, sig == SIGSEGV ? &g_guard.old_segv : &g_guard.old_bus, NULL);
}

static void on_fault(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    int saved_errno = errno;
    if (si->si_code <= 0) {
        /* Sent by kill/raise, not a fault: hand it to the previous disposition. */
        guard_restore(sig);
        raise(sig);
        errno = saved_errno;
        return;
    }
    uintptr_t page = (uintptr_t)si->si_addr & ~(g_guard.page_size - 1);
    if (g_guard.active && page >= g_guard.first_page && page <= g_guard.last_page) {
        void *r = mmap((void *)page, g_guard.page_size, PROT_READ,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r != MAP_FAILED) {
            g_guard.skipped++;
            if (!g_guard.logged) {
                g_guard.logged = 1;
                hs_log_tag(HS_MU_LOG_TAG,
                           "skipped unreadable page at 0x%lx (read as zeros; later "
                           "ones are only counted)",
                           (unsigned long)page);
            }
            errno = saved_errno;
            return;
        }
    }
    /* Not a read of ours: let the fault happen again under the previous handler. */
    guard_restore(sig);
    errno = saved_errno;
}

int hs_mu_fault_guard_install(void)
{
    if (g_guard.installed)
        return EBUSY;
    long ps = sysconf(_SC_PAGESIZE);
    g_guard.page_size = ps > 0 ? (uintptr_t)ps : 4096;
    g_guard.active = 0;
    g_guard.skipped = 0;
    g_guard.logged = 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_guard.old_segv) != 0)
        return errno;
    if (sigaction(SIGBUS, &sa, &g_guard.old_bus) != 0) {
        int err = errno;
        sigaction(SIGSEGV, &g_guard.old_segv, NULL);
        return err;
    }
    /* A fault while the signal is blocked would kill the process outright. */
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGSEGV);
    sigaddset(&unblock, SIGBUS);
    sigprocmask(SIG_UNBLOCK, &unblock, &g_guard.old_mask);
    g_guard.installed = true;
    return 0;
}

void hs_mu_fault_guard_remove(void)
{
    if (!g_guard.installed)
        return;
    g_guard.active = 0;
    sigaction(SIGSEGV, &g_guard.old_segv, NULL);
    sigaction(SIGBUS, &g_guard.old_bus, NULL);
    sigprocmask(SIG_SETMASK, &g_guard.old_mask, NULL);
    g_guard.installed = false;
}

size_t hs_mu_fault_guard_skipped_pages(void)
{
    return g_guard.skipped;
}

void hs_mu_fault_guard_enter(uintptr_t begin, uintptr_t end)
{
    if (end <= begin) {
        hs_mu_fault_guard_leave();
        return;
    }
    uintptr_t mask = ~(g_guard.page_size - 1);
    g_guard.first_page = begin & mask;
    g_guard.last_page = (end - 1) & mask;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g_guard.active = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void hs_mu_fault_guard_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g_guard.active = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void hs_mu_read_guarded(void *dst, uintptr_t src, size_t len)
{
    if (len == 0)
        return;
    hs_mu_fault_guard_enter(src, src + len);
    uint8_t *d = dst;
    size_t i = 0;
    /* Volatile loads: no wider or earlier reads than the ones written here. */
    while (i < len && ((src + i) & 7) != 0) {
        d[i] = *(const volatile uint8_t *)(src + i);
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t v = *(const volatile uint64_t *)(src + i);
        memcpy(d + i, &v, 8);
    }
    for (; i < len; i++)
        d[i] = *(const volatile uint8_t *)(src + i);
    hs_mu_fault_guard_leave();
}

/* ---- Arena helpers ---------------------------------------------------------------------- */

/* Grows *array (elements of elem bytes, *cap of them) to hold at least need; keeps contents.
 * Large arrays grow by mremap (hs_arena_grow): nothing is copied. */
static bool grow(struct hs_arena *a, void **array, size_t *cap, size_t need, size_t elem,
                 size_t initial)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : initial;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return false;
        ncap *= 2;
    }
    void *p = hs_arena_grow(a, *array, *cap * elem, ncap * elem);
    if (!p)
        return false;
    *array = p;
    *cap = ncap;
    return true;
}

/* ---- The page table ---------------------------------------------------------------------- */

/* Two levels: an open-addressing hash of 1 GiB windows (a handful for most programs: it stays
 * in L1) whose entries point to arrays of HS_MU_WINDOW_PAGES page entries, indexed directly.
 * A page lookup is a probe of that small hash and one array index.
 *
 * The window hash is kept specialised rather than on hash_table.h, as the marking's lookup is
 * the sweep's hot path: with the shared table, flush_batch (the lookups of a batch of words)
 * ran 98.3 M instructions against 90.9 M here (+8%; +0.9% for the whole walk), callgrind on
 * bench/unreachable_walk_bench 100000 (2026-11-26). The shared table checks "empty" before
 * "matches" on every probe; here a hit, the common case (a handful of windows), is one compare.
 */

static inline size_t window_hash(uintptr_t key, size_t mask)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* The page entries of window number `window`, or NULL. */
static inline struct hs_mu_page *window_pages(const struct hs_mu_heap_walker *w, uintptr_t window)
{
    if (!w->windows)
        return NULL;
    uintptr_t key = window + 1;
    size_t h = window_hash(key, w->window_mask);
    for (;;) {
        const struct hs_mu_window *x = &w->windows[h];
        if (x->key == key)
            return x->pages;
        if (x->key == 0)
            return NULL;
        h = (h + 1) & w->window_mask;
    }
}

/* The entry of page number `page`, or NULL. */
static inline const struct hs_mu_page *find_page(const struct hs_mu_heap_walker *w, uintptr_t page)
{
    const struct hs_mu_page *pages = window_pages(w, page >> HS_MU_WINDOW_SHIFT);
    if (!pages)
        return NULL;
    const struct hs_mu_page *p = &pages[page & (HS_MU_WINDOW_PAGES - 1)];
    return p->key == page + 1 ? p : NULL;
}

static size_t window_table_bytes(const struct hs_mu_heap_walker *w)
{
    return w->windows ? (w->window_mask + 1) * sizeof(*w->windows) : 0;
}

static const size_t window_bytes = HS_MU_WINDOW_PAGES * sizeof(struct hs_mu_page);

/* Adds window `window` (its page entries zeroed); NULL when memory ran out. */
static struct hs_mu_page *add_window(struct hs_mu_heap_walker *w, uintptr_t window)
{
    if ((w->num_windows + 1) * 2 > (w->windows ? w->window_mask + 1 : 0)) {
        size_t cap = w->windows ? (w->window_mask + 1) * 2 : 16;
        struct hs_mu_window *t = hs_arena_calloc(w->arena, cap * sizeof(*t));
        if (!t)
            return NULL;
        for (size_t i = 0; w->windows && i <= w->window_mask; i++) {
            if (w->windows[i].key == 0)
                continue;
            size_t h = window_hash(w->windows[i].key, cap - 1);
            while (t[h].key != 0)
                h = (h + 1) & (cap - 1);
            t[h] = w->windows[i];
        }
        hs_arena_free(w->arena, w->windows, window_table_bytes(w));
        w->windows = t;
        w->window_mask = cap - 1;
    }
    struct hs_mu_page *pages = hs_arena_calloc(w->arena, window_bytes);
    if (!pages)
        return NULL;
    size_t h = window_hash(window + 1, w->window_mask);
    while (w->windows[h].key != 0)
        h = (h + 1) & w->window_mask;
    w->windows[h] = (struct hs_mu_window){window + 1, pages};
    w->num_windows++;
    return pages;
}

/* The entry of page number `page`, added (count 0, no slots) when absent; NULL when memory
 * ran out. Entries never move. */
static struct hs_mu_page *page_entry(struct hs_mu_heap_walker *w, uintptr_t page)
{
    uintptr_t key = page + 1;
    if (w->last_page && w->last_page->key == key)
        return w->last_page;
    /* Listed in hash order, consecutive blocks are rarely in one page but mostly in one
     * window: its page array is kept at hand (arrays never move). */
    uintptr_t window = page >> HS_MU_WINDOW_SHIFT;
    struct hs_mu_page *pages = w->last_window_pages;
    if (!pages || w->last_window != window) {
        pages = window_pages(w, window);
        if (!pages && !(pages = add_window(w, window)))
            return NULL;
        w->last_window = window;
        w->last_window_pages = pages;
    }
    struct hs_mu_page *p = &pages[page & (HS_MU_WINDOW_PAGES - 1)];
    if (p->key == 0) {
        *p = (struct hs_mu_page){.key = key, .slots = HS_MU_NO_SLOTS};
        w->num_pages++;
    }
    w->last_page = p;
    return p;
}

/* Calls fn on every page entry (in no particular order). */
static void for_each_page(struct hs_mu_heap_walker *w, void (*fn)(struct hs_mu_page *, void *),
                          void *arg)
{
    for (size_t i = 0; w->windows && i <= w->window_mask; i++) {
        struct hs_mu_page *pages = w->windows[i].pages;
        if (w->windows[i].key == 0)
            continue;
        for (size_t k = 0; k < HS_MU_WINDOW_PAGES; k++)
            if (pages[k].key != 0)
                fn(&pages[k], arg);
    }
}

/* ---- Building ---------------------------------------------------------------------------- */

void hs_mu_heap_walker_init(struct hs_mu_heap_walker *w, struct hs_arena *arena)
{
    memset(w, 0, sizeof(*w));
    w->arena = arena;
}

void hs_mu_heap_walker_destroy(struct hs_mu_heap_walker *w)
{
    struct hs_arena *a = w->arena;
    hs_arena_free(a, w->allocs, w->cap_allocs * sizeof(*w->allocs));
    for (size_t i = 0; w->windows && i <= w->window_mask; i++)
        if (w->windows[i].key != 0)
            hs_arena_free(a, w->windows[i].pages, window_bytes);
    hs_arena_free(a, w->windows, window_table_bytes(w));
    hs_arena_free(a, w->slots, w->num_slot_words * sizeof(*w->slots));
    hs_arena_free(a, w->big, w->cap_big * sizeof(*w->big));
    if (w->finished) {
        hs_arena_free(a, w->marked, (w->num_allocs / 64 + 1) * sizeof(*w->marked));
        hs_arena_free(a, w->work, w->cap_work * sizeof(*w->work));
        hs_arena_free(a, w->pending, (w->num_allocs / 64 + 1) * sizeof(*w->pending));
    }
    hs_arena_free(a, w->roots, w->cap_roots * sizeof(*w->roots));
    hs_arena_free(a, w->root_values, w->cap_root_values * sizeof(*w->root_values));
    hs_mu_heap_walker_init(w, a);
}

/* Counts an allocation beginning at `begin` in its page. */
static bool count_in_page(struct hs_mu_heap_walker *w, uintptr_t begin)
{
    struct hs_mu_page *p = page_entry(w, begin >> HS_MU_PAGE_SHIFT);
    if (!p)
        return false;
    p->count++;
    return true;
}

bool hs_mu_heap_walker_add_allocation(struct hs_mu_heap_walker *w, uintptr_t begin, size_t size)
{
    if (w->out_of_memory || w->finished)
        return false;
    if (size == 0)
        size = 1;
    if (begin + size < begin) /* wraps: clip at the top of the address space */
        size = UINTPTR_MAX - begin;
    if (size == 0)
        return true;
    /* Indices are 32-bit; the page counts cannot overflow before this. */
    if (w->num_allocs >= UINT32_MAX - 1 ||
        !grow(w->arena, (void **)&w->allocs, &w->cap_allocs, w->num_allocs + 1, sizeof(*w->allocs),
              1024) ||
        !count_in_page(w, begin)) {
        w->out_of_memory = true;
        return false;
    }
    w->allocs[w->num_allocs].begin = begin;
    w->allocs[w->num_allocs].end = begin + size;
    w->num_allocs++;
    return true;
}

static void collect_one(uintptr_t ptr, size_t size, void *arg)
{
    hs_mu_heap_walker_add_allocation(arg, ptr, size);
}

_Static_assert(sizeof(struct hs_mu_alloc) == 2 * sizeof(uintptr_t), "list() writes pairs");

/* From a source that lists every allocation at once (heap->list): straight into allocs[]
 * after those already there, then one pass that turns the {begin, size} pairs into ranges (as
 * hs_mu_heap_walker_add_allocation does) and counts each in its page. No call per block. */
static int collect_listed(struct hs_mu_heap_walker *w, const struct hs_mu_heap_source *heap)
{
    size_t want = heap->list(NULL, 0), n;
    if (want == SIZE_MAX)
        return -ENOTSUP;
    for (;;) {
        /* The count may have grown in between in a live process (never in the sweeper). */
        if (want > SIZE_MAX / 2 - w->num_allocs ||
            !grow(w->arena, (void **)&w->allocs, &w->cap_allocs, w->num_allocs + want,
                  sizeof(*w->allocs), 1024))
            return -ENOMEM;
        size_t room = w->cap_allocs - w->num_allocs;
        n = heap->list((uintptr_t(*)[2])(void *)(w->allocs + w->num_allocs), room);
        if (n == SIZE_MAX)
            return -ENOTSUP;
        if (n <= room)
            break;
        want = n;
    }
    size_t kept = w->num_allocs, end = w->num_allocs + n;
    for (size_t i = w->num_allocs; i < end; i++) {
        uintptr_t begin = w->allocs[i].begin, size = w->allocs[i].end;
        if (size == 0)
            size = 1;
        if (begin + size < begin) /* wraps: clip at the top of the address space */
            size = UINTPTR_MAX - begin;
        if (size == 0)
            continue;
        if (kept >= UINT32_MAX - 1 || !count_in_page(w, begin)) {
            w->out_of_memory = true;
            return -ENOMEM;
        }
        w->allocs[kept].begin = begin;
        w->allocs[kept].end = begin + size;
        kept++;
    }
    w->num_allocs = kept;
    return 0;
}

int hs_mu_heap_walker_collect(struct hs_mu_heap_walker *w, const struct hs_mu_heap_source *heap)
{
    if (!heap || (!heap->iterate && !heap->list))
        return -ENOTSUP;
    if (heap->list && !w->out_of_memory && !w->finished)
        return collect_listed(w, heap);
    if (!heap->iterate || heap->iterate(0, SIZE_MAX, collect_one, w) != 0)
        return -ENOTSUP;
    return w->out_of_memory ? -ENOMEM : 0;
}

static int by_begin(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = ((const struct hs_mu_alloc *)pa)->begin,
              b = ((const struct hs_mu_alloc *)pb)->begin;
    return a < b ? -1 : a > b;
}

static int by_page(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    uintptr_t a = (*(struct hs_mu_page *const *)pa)->key,
              b = (*(struct hs_mu_page *const *)pb)->key;
    return a < b ? -1 : a > b;
}

/* Sorts a few allocations by begin (insertion sort; hs_sort for longer runs). */
static void sort_run(struct hs_mu_alloc *a, size_t n)
{
    if (n > 32) {
        hs_sort(a, n, sizeof(*a), by_begin, NULL);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct hs_mu_alloc x = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1].begin > x.begin) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

static inline size_t slot_of(const struct hs_mu_page *p, uintptr_t addr)
{
    return (addr & (HS_MU_PAGE_BYTES - 1)) >> p->slot_shift;
}

/* For a page with a slot array: where each slot's allocations begin in allocs[] (s[k]; s[nslots]
 * is the page's end), from where they are now (in order already, or about to be put in order
 * by a scatter). Nothing moves. */
static void count_slots(struct hs_mu_heap_walker *w, const struct hs_mu_page *p)
{
    const struct hs_mu_alloc *run = w->allocs + p->base;
    size_t nslots = (size_t)1 << (HS_MU_PAGE_SHIFT - p->slot_shift);
    uint32_t *s = w->slots + p->slots;
    memset(s, 0, (nslots + 1) * sizeof(*s));
    for (size_t i = 0; i < p->count; i++)
        s[slot_of(p, run[i].begin)]++;
    uint32_t at = p->base;
    for (size_t k = 0; k <= nslots; k++) {
        uint32_t c = s[k];
        s[k] = at;
        at += c;
    }
}

/* Sorts the run of allocations of page p (allocs[p->base, p->base + p->count)) and, for a page
 * with more than HS_MU_PAGE_RUN allocations, fills its slot array: a counting sort by slot
 * through tmp (room for the run), then a sort within each slot. */
static void index_page(struct hs_mu_heap_walker *w, const struct hs_mu_page *p,
                       struct hs_mu_alloc *tmp)
{
    struct hs_mu_alloc *run = w->allocs + p->base;
    if (p->slots == HS_MU_NO_SLOTS) {
        sort_run(run, p->count);
        return;
    }
    size_t nslots = (size_t)1 << (HS_MU_PAGE_SHIFT - p->slot_shift);
    uint32_t *s = w->slots + p->slots;
    count_slots(w, p);
    for (size_t i = 0; i < p->count; i++)
        tmp[s[slot_of(p, run[i].begin)]++ - p->base] = run[i];
    /* s[k] is now where slot k + 1 starts: shift back. */
    for (size_t k = nslots - 1; k > 0; k--)
        s[k] = s[k - 1];
    s[0] = p->base;
    memcpy(run, tmp, p->count * sizeof(*run));
    for (size_t k = 0; k < nslots; k++)
        if (s[k + 1] - s[k] > 1)
            sort_run(w->allocs + s[k], s[k + 1] - s[k]);
}

struct collect_pages {
    struct hs_mu_page **out;
    size_t n;
};

static void collect_page(struct hs_mu_page *p, void *arg)
{
    struct collect_pages *c = arg;
    c->out[c->n++] = p;
}

static void zero_count(struct hs_mu_page *p, void *arg)
{
    (void)arg;
    p->count = 0;
}

/* Sorts allocs[] (in listing order, each counted in its page's entry) by begin and indexes it:
 * every page entry gets its base, and the pages with many allocations their slot arrays.
 * A list made of a few sorted runs (run_order.h: malloc debug's, region by region) is put in
 * order in place; any other by a counting sort: by page (a scatter into a new array), then
 * within each page. */
static int index_allocations(struct hs_mu_heap_walker *w)
{
    int in_order = hs_mu_order_runs(w->allocs, w->num_allocs, w->arena);
    if (in_order < 0)
        return in_order;
    w->sorted_in_place = in_order == 1;
    size_t np = w->num_pages;
    struct hs_mu_page **order = hs_arena_alloc(w->arena, (np ? np : 1) * sizeof(*order));
    if (!order)
        return -ENOMEM;
    struct collect_pages c = {order, 0};
    for_each_page(w, collect_page, &c);
    hs_sort(order, np, sizeof(*order), by_page, NULL);

    /* Bases, and where each dense page's slots go. */
    size_t at = 0, words = 0, longest = 0;
    for (size_t i = 0; i < np; i++) {
        struct hs_mu_page *p = order[i];
        p->base = (uint32_t)at;
        p->fill = 0;
        at += p->count;
        p->slots = HS_MU_NO_SLOTS;
        if (p->count <= HS_MU_PAGE_RUN)
            continue;
        /* About one allocation per slot: as many slots as allocations (a power of two), slots
         * no smaller than HS_MU_MIN_SLOT bytes. */
        unsigned shift = HS_MU_PAGE_SHIFT;
        while (shift > HS_MU_MIN_SLOT_SHIFT && ((size_t)1 << (HS_MU_PAGE_SHIFT - shift)) < p->count)
            shift--;
        p->slot_shift = (uint8_t)shift;
        p->slots = (uint32_t)words;
        words += ((size_t)1 << (HS_MU_PAGE_SHIFT - shift)) + 1;
        if (p->count > longest)
            longest = p->count;
    }
    int r = 0;
    size_t n = w->num_allocs;
    w->num_slot_words = words;
    w->slots = words ? hs_arena_alloc(w->arena, words * sizeof(*w->slots)) : NULL;
    if ((words && !w->slots) || words >= UINT32_MAX) {
        r = -ENOMEM;
        goto done;
    }
    if (in_order) {
        for (size_t i = 0; i < np; i++)
            if (order[i]->slots != HS_MU_NO_SLOTS)
                count_slots(w, order[i]);
        goto done;
    }
    struct hs_mu_alloc *sorted = hs_arena_alloc(w->arena, (n ? n : 1) * sizeof(*sorted));
    struct hs_mu_alloc *tmp = hs_arena_alloc(w->arena, (longest ? longest : 1) * sizeof(*tmp));
    if (!sorted || !tmp) {
        hs_arena_free(w->arena, sorted, (n ? n : 1) * sizeof(*sorted));
        hs_arena_free(w->arena, tmp, (longest ? longest : 1) * sizeof(*tmp));
        r = -ENOMEM;
        goto done;
    }
    /* Scatter by page, into a second array. (Permuting in place, which would spare its fresh
     * pages, was twice as slow at 10^7 blocks: each step waits for the cache miss of the step
     * before, where the scatter's reads stream and its writes do not wait.) */
    w->last_page = NULL;
    for (size_t i = 0; i < n; i++) {
        struct hs_mu_page *p = page_entry(w, w->allocs[i].begin >> HS_MU_PAGE_SHIFT);
        sorted[p->base + p->fill++] = w->allocs[i];
    }
    hs_arena_free(w->arena, w->allocs, w->cap_allocs * sizeof(*w->allocs));
    w->allocs = sorted;
    w->cap_allocs = n ? n : 1;
    for (size_t i = 0; i < np; i++)
        index_page(w, order[i], tmp);
    hs_arena_free(w->arena, tmp, (longest ? longest : 1) * sizeof(*tmp));
done:
    hs_arena_free(w->arena, order, (np ? np : 1) * sizeof(*order));
    return r;
}

/* Drops ranges overlapping an earlier kept one (a broken allocation list), in place, from
 * allocs[from] on (allocs[0, from) overlap nothing). */
static void drop_overlapping(struct hs_mu_heap_walker *w, size_t from)
{
    size_t kept = from;
    for (size_t i = from; i < w->num_allocs; i++) {
        if (kept > 0 && w->allocs[i].begin < w->allocs[kept - 1].end) {
            if (w->dropped_overlapping++ == 0)
                hs_log_tag(HS_MU_LOG_TAG, "allocation 0x%lx-0x%lx overlaps 0x%lx-0x%lx, ignored",
                           (unsigned long)w->allocs[i].begin, (unsigned long)w->allocs[i].end,
                           (unsigned long)w->allocs[kept - 1].begin,
                           (unsigned long)w->allocs[kept - 1].end);
            continue;
        }
        w->allocs[kept++] = w->allocs[i];
    }
    w->num_allocs = kept;
}

/* After dropping: the index again, from the (still sorted) allocations. */
static int reindex(struct hs_mu_heap_walker *w)
{
    for_each_page(w, zero_count, NULL);
    hs_arena_free(w->arena, w->slots, w->num_slot_words * sizeof(*w->slots));
    w->slots = NULL;
    w->num_slot_words = 0;
    w->last_page = NULL;
    for (size_t i = 0; i < w->num_allocs; i++)
        if (!count_in_page(w, w->allocs[i].begin))
            return -ENOMEM;
    return index_allocations(w);
}

/* One pass over the sorted allocations: finds the first that overlaps the one before it
 * (returned; num_allocs when none), sums their bytes, and gives the pages that allocations
 * run into past their own an entry (no allocation begins there: the one to find is the last
 * beginning below, base - 1), unless the allocation covers more than HS_MU_BIG_PAGES pages;
 * those go to big[] instead. Stops at an overlap (the caller drops it and starts again). */
static size_t index_tails(struct hs_mu_heap_walker *w, int *err)
{
    w->num_big = 0;
    w->allocation_bytes = 0;
    *err = 0;
    uintptr_t prev_end = 0;
    for (size_t i = 0; i < w->num_allocs; i++) {
        uintptr_t begin = w->allocs[i].begin, end = w->allocs[i].end;
        if (i > 0 && begin < prev_end)
            return i;
        prev_end = end;
        w->allocation_bytes += end - begin;
        uintptr_t p0 = begin >> HS_MU_PAGE_SHIFT;
        uintptr_t p1 = (end - 1) >> HS_MU_PAGE_SHIFT;
        if (__builtin_expect(p1 == p0, 1))
            continue;
        if (p1 - p0 > HS_MU_BIG_PAGES) {
            if (!grow(w->arena, (void **)&w->big, &w->cap_big, w->num_big + 1, sizeof(*w->big), 16)) {
                *err = -ENOMEM;
                return i;
            }
            w->big[w->num_big++] = (uint32_t)i;
            continue;
        }
        for (uintptr_t p = p0 + 1; p <= p1; p++) {
            struct hs_mu_page *e = page_entry(w, p);
            if (!e) {
                *err = -ENOMEM;
                return i;
            }
            if (e->count == 0)
                e->base = (uint32_t)(i + 1);
        }
    }
    if (w->num_big) {
        w->big_min = w->allocs[w->big[0]].begin;
        w->big_span = w->allocs[w->big[w->num_big - 1]].end - w->big_min;
    }
    return w->num_allocs;
}

int hs_mu_heap_walker_finish(struct hs_mu_heap_walker *w)
{
    if (w->finished)
        return 0;
    if (w->out_of_memory)
        return -ENOMEM;
    if (w->num_allocs >= UINT32_MAX)
        return -ENOMEM;
    int r = index_allocations(w);
    if (r != 0)
        return r;
    /* A broken list's overlaps are dropped and the index made again (rare: the page entries
     * the tails made stay, with empty runs, as reindex leaves them). */
    for (size_t at; (at = index_tails(w, &r)) < w->num_allocs;) {
        if (r != 0)
            return r;
        drop_overlapping(w, at);
        if ((r = reindex(w)) != 0)
            return r;
    }
    if (r != 0)
        return r;
    size_t n = w->num_allocs;
    if (n) {
        w->min = w->allocs[0].begin;
        w->span = w->allocs[n - 1].end - w->min;
    }
    w->finished = true; /* from here on destroy frees the mark state too */
    w->marked = hs_arena_calloc(w->arena, (n / 64 + 1) * sizeof(*w->marked));
    /* The stack holds at most the "few" of hs_mu_heap_walker_mark: past that, new marks wait
     * in the bitmap (one array holding 10^7 blocks, scanned depth-first, filled a stack of
     * 40 MB of fresh pages before). */
    w->cap_work = n / 64 + 64;
    w->work = hs_arena_alloc(w->arena, w->cap_work * sizeof(*w->work));
    w->pending = hs_arena_calloc(w->arena, (n / 64 + 1) * sizeof(*w->pending));
    if (!w->marked || !w->work || !w->pending)
        return -ENOMEM;
    return 0;
}

bool hs_mu_heap_walker_add_root_flags(struct hs_mu_heap_walker *w, uintptr_t begin, uintptr_t end,
                                      unsigned flags)
{
    if (end <= begin)
        return true;
    if (!grow(w->arena, (void **)&w->roots, &w->cap_roots, w->num_roots + 1, sizeof(*w->roots), 64))
        return false;
    w->roots[w->num_roots].begin = begin;
    w->roots[w->num_roots].end = end;
    w->roots[w->num_roots].flags = flags;
    w->num_roots++;
    return true;
}

bool hs_mu_heap_walker_add_root(struct hs_mu_heap_walker *w, uintptr_t begin, uintptr_t end)
{
    return hs_mu_heap_walker_add_root_flags(w, begin, end, 0);
}

bool hs_mu_heap_walker_add_root_value(struct hs_mu_heap_walker *w, uintptr_t value)
{
    if (!grow(w->arena, (void **)&w->root_values, &w->cap_root_values, w->num_root_values + 1,
              sizeof(*w->root_values), 256))
        return false;
    w->root_values[w->num_root_values++] = value;
    return true;
}

/* ---- Lookup ------------------------------------------------------------------------------ */

/* Last index in [lo, lo + n) whose begin <= addr (n >= 1; lo itself if none). */
static inline size_t last_begin_at_or_below(const struct hs_mu_alloc *allocs, size_t lo, size_t n,
                                            uintptr_t addr)
{
    while (n > 1) {
        size_t half = n / 2;
        if (allocs[lo + half].begin <= addr)
            lo += half;
        n -= half;
    }
    return lo;
}

static size_t find_big(const struct hs_mu_heap_walker *w, uintptr_t addr)
{
    if (w->num_big == 0 || addr - w->big_min >= w->big_span)
        return HS_MU_NONE;
    size_t lo = 0, n = w->num_big;
    while (n > 1) {
        size_t half = n / 2;
        if (w->allocs[w->big[lo + half]].begin <= addr)
            lo += half;
        n -= half;
    }
    const struct hs_mu_alloc *a = &w->allocs[w->big[lo]];
    return addr >= a->begin && addr < a->end ? w->big[lo] : HS_MU_NONE;
}

/* The allocations beginning in addr's slot of page p: [*lo, *hi); the whole run for a page
 * without slots. */
static inline const uint32_t *slot_bounds(const struct hs_mu_heap_walker *w,
                                          const struct hs_mu_page *p, uintptr_t addr)
{
    return w->slots + p->slots + slot_of(p, addr);
}

/* The allocation holding addr, given the allocations [lo, hi) beginning in its slot (or page):
 * the last of them beginning at or below addr, else the last one beginning below them. */
static inline size_t resolve(const struct hs_mu_heap_walker *w, uintptr_t addr, size_t lo,
                             size_t hi)
{
    size_t i;
    if (hi > lo && w->allocs[lo].begin <= addr)
        i = last_begin_at_or_below(w->allocs, lo, hi - lo, addr);
    else if (lo > 0)
        i = lo - 1;
    else
        return HS_MU_NONE;
    return addr < w->allocs[i].end ? i : HS_MU_NONE;
}

size_t hs_mu_heap_walker_find_slow(const struct hs_mu_heap_walker *w, uintptr_t addr)
{
    if (addr - w->min >= w->span)
        return HS_MU_NONE;
    const struct hs_mu_page *p = find_page(w, addr >> HS_MU_PAGE_SHIFT);
    if (!p)
        return find_big(w, addr);
    if (p->slots == HS_MU_NO_SLOTS)
        return resolve(w, addr, p->base, (size_t)p->base + p->count);
    const uint32_t *s = slot_bounds(w, p, addr);
    return resolve(w, addr, s[0], s[1]);
}

size_t hs_mu_heap_walker_first_ending_after(const struct hs_mu_heap_walker *w, uintptr_t addr)
{
    return hs_range_first_ending_after(w->allocs, w->num_allocs, addr, end);
}

/* ---- Marking ----------------------------------------------------------------------------- */

/* Marks allocation i (HS_MU_NONE: nothing) if it is not yet. */
static inline void mark_index(struct hs_mu_heap_walker *w, size_t i)
{
    if (i == HS_MU_NONE || hs_mu_heap_walker_is_marked(w, i))
        return;
    w->marked[i / 64] |= 1ull << (i % 64);
    w->num_marked++;
    if (w->use_stack && w->num_work < w->cap_work) {
        w->work[w->num_work++] = (uint32_t)i;
    } else {
        w->pending[i / 64] |= 1ull << (i % 64);
        w->num_pending++;
    }
}

/* Looks up and marks the batched candidates, in sweeps over the batch so that the cache misses
 * of one sweep overlap: page entries (a small table, in cache) and the slot bounds of dense
 * pages (prefetched), then the runs of allocations (prefetched by the sweep before), then the
 * mark bytes (prefetched by the second). */
static void flush_batch(struct hs_mu_heap_walker *w)
{
    size_t n = w->num_batch;
    w->num_batch = 0;
    const uint32_t *bounds[HS_MU_BATCH];
    size_t lo[HS_MU_BATCH], hi[HS_MU_BATCH], idx[HS_MU_BATCH];
    for (size_t k = 0; k < n; k++) {
        uintptr_t v = w->batch[k];
        const struct hs_mu_page *p = find_page(w, v >> HS_MU_PAGE_SHIFT);
        bounds[k] = NULL;
        idx[k] = HS_MU_NONE;
        lo[k] = hi[k] = 0;
        if (!p) {
            idx[k] = find_big(w, v); /* rare: inside a huge allocation, or no allocation */
            lo[k] = hi[k] = HS_MU_NONE;
        } else if (p->slots == HS_MU_NO_SLOTS) {
            lo[k] = p->base;
            hi[k] = (size_t)p->base + p->count;
        } else {
            bounds[k] = slot_bounds(w, p, v);
            __builtin_prefetch(bounds[k]);
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (bounds[k]) {
            lo[k] = bounds[k][0];
            hi[k] = bounds[k][1];
        }
        /* The allocation resolve() reads first. */
        if (lo[k] != HS_MU_NONE && (hi[k] > lo[k] || lo[k] > 0))
            __builtin_prefetch(&w->allocs[hi[k] > lo[k] ? lo[k] : lo[k] - 1]);
    }
    for (size_t k = 0; k < n; k++) {
        if (lo[k] != HS_MU_NONE)
            idx[k] = resolve(w, w->batch[k], lo[k], hi[k]);
        if (idx[k] != HS_MU_NONE)
            __builtin_prefetch(&w->marked[idx[k] / 64]);
    }
    for (size_t k = 0; k < n; k++) {
        if (w->chunk_filter && idx[k] != HS_MU_NONE) {
            uintptr_t v = w->batch[k];
            const struct hs_mu_alloc *a = &w->allocs[idx[k]];
            if ((v & 15) == 0 && v > a->begin && v + 8 >= a->end)
                continue; /* glibc's pointer to the next chunk's header */
        }
        mark_index(w, idx[k]);
    }
}

/* Queues the words of [b, e) (8-byte aligned) that pass the range test for flush_batch. The
 * caller has declared the range to the fault guard: plain loads, a faulting one is simply
 * executed again once the handler has mapped the zero page. */
static inline void scan_words(struct hs_mu_heap_walker *w, uintptr_t b, uintptr_t e)
{
    const uintptr_t min = w->min, span = w->span;
    for (const uintptr_t *p = (const uintptr_t *)b; p < (const uintptr_t *)e; p++) {
        uintptr_t v = *p;
        if (__builtin_expect(v - min < span, 0)) {
            w->batch[w->num_batch++] = v;
            if (w->num_batch == HS_MU_BATCH)
                flush_batch(w);
        }
    }
}

/* Scans the aligned words of [begin, end) under the guard. */
static void scan_range(struct hs_mu_heap_walker *w, uintptr_t begin, uintptr_t end)
{
    uintptr_t b = (begin + 7) & ~(uintptr_t)7, e = end & ~(uintptr_t)7;
    if (e <= b || end < begin)
        return;
    hs_mu_fault_guard_enter(b, e);
    scan_words(w, b, e);
    hs_mu_fault_guard_leave();
}

static void scan_alloc(struct hs_mu_heap_walker *w, size_t i)
{
    scan_range(w, w->allocs[i].begin, w->allocs[i].end);
}

/* Prefetches the start (up to 1 KiB) of allocation i. A pass reads allocations in address
 * order, but skipping the ones not marked breaks the hardware prefetcher's stream: reading 9
 * blocks of 1000 bytes out of 10 took twice as long as reading all of them, and about as long
 * again with a prefetch two allocations ahead (measured). Never faults: prefetches of
 * unreadable memory are dropped. */
static inline void prefetch_alloc(const struct hs_mu_heap_walker *w, size_t i)
{
    const struct hs_mu_alloc *a = &w->allocs[i];
    size_t len = a->end - a->begin < 1024 ? a->end - a->begin : 1024;
    for (size_t off = 0; off < len; off += 64)
        __builtin_prefetch((const void *)(a->begin + off));
}

/* The first pending allocation in the words after k (looking at most 4 words ahead), or
 * HS_MU_NONE. */
static inline size_t next_pending(const struct hs_mu_heap_walker *w, size_t k, size_t words)
{
    for (size_t j = k + 1; j < words && j <= k + 4; j++)
        if (w->pending[j])
            return j * 64 + (size_t)__builtin_ctzll(w->pending[j]);
    return HS_MU_NONE;
}

/* Scans the pending allocations of pending word k, in address order, with one fault guard
 * range for all of them (their reads stay inside it; the gaps are never read). Allocations
 * that the scan marks in word k are scanned too before returning. */
static void scan_pending_word(struct hs_mu_heap_walker *w, size_t k, size_t words)
{
    uint64_t bits;
    while ((bits = w->pending[k]) != 0) {
        w->pending[k] = 0;
        w->num_pending -= (size_t)__builtin_popcountll(bits);
        const struct hs_mu_alloc *a = w->allocs + k * 64;
        uintptr_t lo = a[__builtin_ctzll(bits)].begin, hi = a[63 - __builtin_clzll(bits)].end;
        hs_mu_fault_guard_enter(lo & ~(uintptr_t)7, hi & ~(uintptr_t)7);
        w->num_pass_scans += (size_t)__builtin_popcountll(bits);
        for (; bits; bits &= bits - 1) {
            size_t i = (size_t)__builtin_ctzll(bits);
            /* Two allocations ahead, in this word or the next ones. */
            uint64_t later = bits & (bits - 1);
            later &= later - 1;
            size_t ahead = later                 ? k * 64 + (size_t)__builtin_ctzll(later)
                           : (bits & (bits - 1)) ? next_pending(w, k, words)
                                                 : HS_MU_NONE;
            if (ahead != HS_MU_NONE)
                prefetch_alloc(w, ahead);
            uintptr_t b = (a[i].begin + 7) & ~(uintptr_t)7, e = a[i].end & ~(uintptr_t)7;
            if (b < e)
                scan_words(w, b, e);
        }
        hs_mu_fault_guard_leave();
    }
}

void hs_mu_heap_walker_mark(struct hs_mu_heap_walker *w)
{
    if (!w->finished || w->num_allocs == 0)
        return;
    w->use_stack = false;
    w->chunk_filter = false;
    w->num_batch = 0;
    for (size_t i = 0; i < w->num_root_values; i++)
        mark_index(w, hs_mu_heap_walker_find_slow(w, w->root_values[i]));
    for (size_t i = 0; i < w->num_roots; i++) {
        bool filter = (w->roots[i].flags & HS_MU_ROOT_MALLOC_STATE) != 0;
        if (filter) {
            flush_batch(w);
            w->chunk_filter = true;
        }
        scan_range(w, w->roots[i].begin, w->roots[i].end);
        if (filter) {
            flush_batch(w);
            w->chunk_filter = false;
        }
    }
    flush_batch(w);

    size_t words = w->num_allocs / 64 + 1;
    size_t few = w->cap_work; /* num_allocs / 64 + 64: the stack's size (finish) */
    for (;;) {
        /* Passes in address order while the frontier is wide. */
        w->use_stack = false;
        while (w->num_pending >= few) {
            for (size_t k = 0; k < words; k++)
                if (w->pending[k])
                    scan_pending_word(w, k, words);
            flush_batch(w);
        }
        /* The rest depth-first (pending holds fewer than `few`: they fit on the stack)... */
        w->use_stack = true;
        for (size_t k = 0; k < words && w->num_pending > 0; k++) {
            uint64_t bits = w->pending[k];
            w->pending[k] = 0;
            for (; bits; bits &= bits - 1) {
                hs_assert(w->num_work < w->cap_work);
                w->work[w->num_work++] = (uint32_t)(k * 64 + (size_t)__builtin_ctzll(bits));
                w->num_pending--;
            }
        }
        /* ...until it fans out again (one array holding everything, reached late): marks past
         * a full stack wait in the bitmap, and once `few` wait there the stack joins them, for
         * passes in address order. */
        while (w->num_work > 0 && w->num_pending < few) {
            scan_alloc(w, w->work[--w->num_work]);
            if (w->num_work == 0)
                flush_batch(w);
        }
        if (w->num_work == 0 && w->num_pending == 0)
            return;
        flush_batch(w);
        for (size_t j = 0; j < w->num_work; j++)
            w->pending[w->work[j] / 64] |= 1ull << (w->work[j] % 64);
        w->num_pending += w->num_work;
        w->num_work = 0;
    }
}
