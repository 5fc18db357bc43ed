/* record_allocs.c: the allocation recorder (see record_allocs.h for the file format).
 *
 * The table. A fixed array of `struct rec` (48 bytes) reserved with mmap(MAP_NORESERVE) on
 * the first record, so record_allocs=50000000 costs 2.4 GB of address space but only the
 * pages records touch.
 *
 * Appending. Adders and writers meet on one 64-bit word, g_gate = slots << 1 | WRITING:
 * `slots` counts the places handed out since the table was last emptied, WRITING says a
 * writer (signal dump, exit dump, fork) holds the table. An adder takes a place with ONE
 * fetch_add of 2: the old `slots` is its index, and the WRITING bit in the same result tells
 * it whether it may use it. With an index below num_entries it fills the entry in
 * and publishes it by storing its type last (release); an entry whose type is 0 is not ready
 * yet. An index past the end is simply dropped (63 bits of counter never wrap). So a record
 * is one uncontended read-modify-write plus a clock read and six plain stores.
 *
 * Writing. A writer sets WRITING with fetch_or; the old `slots` value S tells it that the
 * places [0, min(S, num_entries)) were handed out, and no further place will be: an adder
 * that sees WRITING gives its place back at once (fetch_sub of 2) and sleeps on a futex until
 * the writer is done, then tries again, so no record is lost. The writer waits until each of
 * those entries is ready (acquire load of its type: every reserved place is filled in - or
 * cancelled, a non-zero type that is not written - by the thread that took it), writes them,
 * clears their types, and empties the table with a compare-and-swap from exactly
 * (S << 1 | WRITING) to 0, retried while some adder is between taking and giving back a place.
 * To keep the records instead (the file could not be opened) it just clears WRITING. The
 * clears happen-before the next adder's stores (release CAS, acquire fetch_add), so a new
 * record never shows an old type.
 *
 * The writer's wait for an entry to become ready has no time limit, on purpose: the owner of
 * a place may legitimately be held up for long (a free() blocked by malloc_disable, or behind a
 * leak report), and giving up would let the place be handed out again while its owner still
 * means to fill it in. A thread that never fills its place in (it left free() by longjmp from
 * a signal handler) has left glibc's own locks in an unusable state anyway. The writer backs
 * off from spinning to sched_yield to short sleeps.
 *
 * Measured alternatives (append alone, no clock, tight loop on a 2-core VM, ns per record
 * with 1 / 2 threads): this scheme 6.5 / 11; a spinlock around the append 7 / 18, and it
 * deadlocks when a signal handler allocates while its thread holds it; an in-flight counter
 * in the gate (fetch_add + fetch_sub, so the writer need not look at entries) 12 / 25. With
 * the clock read a whole record costs about 33 ns single-threaded (clock_gettime alone: 25).
 *
 * Invariants: only a writer holding g_writer_lock sets or clears WRITING; an adder never
 * waits for a writer while one of its own places is unfilled (records nested in a signal
 * handler that interrupted a record are dropped while WRITING is set, and a nested write
 * request is left for later); the writer never records (hs_md_in_shim is up, so whatever
 * open/write allocate goes straight to glibc).
 *
 * Thread exit. The first record of a thread stores a non-NULL value under a pthread key
 * (under hs_md_in_shim in case pthread_setspecific allocates). The key's destructor stores
 * itself again until the last destructor round (PTHREAD_DESTRUCTOR_ITERATIONS), so that
 * allocations made by other keys' destructors come before the thread_done record.
 *
 * Signals: the SIGRTMAX-18 handler only sets g_dump_requested; the next malloc/free writes.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "record_allocs.h"

#include "debug_state.h"
#include "errno_text.h"
#include "format.h"
#include "hs_assert.h"
#include "log.h"
#include "signals.h"
#include "spinlock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum rec_type {
    REC_NOT_READY = 0, /* place handed out, not filled in yet (or never handed out) */
    REC_MALLOC,
    REC_FREE,
    REC_CALLOC,
    REC_REALLOC,
    REC_MEMALIGN,
    REC_THREAD_DONE,
    REC_CANCELLED, /* reserved, then cancelled: not written */
};

/* Pointers are stored encoded (~value), as in the pointer table, so that the unreachable-
 * memory detector scanning this table (it is ordinary anonymous memory) does not take the
 * recorded blocks for referenced ones. */
struct rec {
    uint32_t type; /* enum rec_type, stored last (release) */
    int32_t tid;
    uint64_t ptr; /* ~pointer */
    uint64_t arg; /* realloc: ~old pointer; calloc: nmemb; memalign: alignment */
    uint64_t size;
    uint64_t start_ns, end_ns;
};

#define GATE_WRITING 1ull
#define GATE_SLOT 2ull
#define GATE_SLOTS(w) ((w) >> 1)

/* Read on every record; written by init (and `entries` once, by the first record). */
static struct {
    bool enabled;
    bool on_exit;
    bool reserve_failed; /* mmap failed: stop trying */
    bool key_created;
    struct rec *entries; /* NULL until the first record */
    size_t num_entries;
    pthread_key_t key;
    char file[PATH_MAX];
} g_cfg __attribute__((aligned(64)));

/* The gate word, alone on its cache line. */
static uint64_t g_gate __attribute__((aligned(64)));

/* Futex word bumped after each write, for adders that wait for the writer. */
static uint32_t g_write_seq __attribute__((aligned(64)));

/* Set by the signal handler, read by each malloc/free: its own line, rarely written. */
static int g_dump_requested __attribute__((aligned(64)));

/* Serialises writers (signal dump, exit dump, fork prepare); never taken by adders. */
static hs_spinlock g_writer_lock = HS_SPINLOCK_INIT;

/* Places [0, g_filled_below) were seen filled in by a holder of g_writer_lock (a place stays
 * filled in until a writer empties the table, which sets this back to 0): a fork waits only
 * for the places handed out since. Waiting for every place at each fork cost a pass over the
 * whole table (8,000,000 places of 48 bytes by default: 20-25 ms) per fork once it had filled
 * up. Guarded by g_writer_lock. */
static uint64_t g_filled_below;
/* The places the last fork's prepare handler waited on (hs_md_record_fork_checked). */
static uint64_t g_fork_checked;

/* Fork: what hs_md_record_lock saw, for hs_md_record_unlock; only the holder of
 * g_writer_lock uses it. */
static struct {
    pid_t pid;
    uint64_t slots;
} g_fork;

/* Whether this thread's fork took g_writer_lock. Per thread: two threads may fork at once,
 * and the second one's prepare handler runs (and waits for the lock) while the first one's
 * fork is under way. */
static __thread bool t_fork_locked __attribute__((tls_model("initial-exec")));

/* Output buffer of the writer (only the holder of g_writer_lock uses it): static because a
 * write can run on a small thread stack. */
static char g_write_buf[64 * 1024];

/* Per thread: cached tid, registration state, and how many of its places are unfilled. */
enum { THREAD_NEW = 0, THREAD_REGISTERED, THREAD_DONE };
static __thread struct {
    int32_t tid;
    int state;
    int depth; /* > 0 between taking a place and filling it in */
} t_rec __attribute__((tls_model("initial-exec")));

uint64_t hs_md_record_now_ns(void)
{
    return hs_monotonic_ns();
}

/* Backs off in a wait loop: spin, then yield, then sleep 100 us at a time. */
static void backoff(unsigned spins)
{
    if (spins < 128) {
        __builtin_ia32_pause();
    } else if (spins < 1128) {
        sched_yield();
    } else {
        struct timespec ts = {0, 100000};
        int saved = errno;
        nanosleep(&ts, NULL);
        errno = saved;
    }
}

/* ---- threads ---- */

static void add(uint32_t type, uint64_t ptr, uint64_t arg, uint64_t size, uint64_t start_ns);

/* Key destructor: value counts the destructor rounds this thread has been through. */
static void on_thread_exit(void *value)
{
    uintptr_t round = (uintptr_t)value;
    if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        hs_md_in_shim++;
        pthread_setspecific(g_cfg.key, (void *)(round + 1));
        hs_md_in_shim--;
        return;
    }
    add(REC_THREAD_DONE, 0, 0, 0, 0);
    t_rec.state = THREAD_DONE;
}

static __attribute__((noinline)) void register_thread(void)
{
    t_rec.tid = (int32_t)gettid();
    t_rec.state = THREAD_REGISTERED;
    hs_md_in_shim++;
    pthread_setspecific(g_cfg.key, (void *)1);
    hs_md_in_shim--;
}

/* ---- the table ---- */

static __attribute__((noinline)) struct rec *reserve_table(void)
{
    if (__atomic_load_n(&g_cfg.reserve_failed, __ATOMIC_RELAXED))
        return NULL;
    size_t bytes = g_cfg.num_entries * sizeof(struct rec);
    int saved = errno;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        bool expected = false;
        if (__atomic_compare_exchange_n(&g_cfg.reserve_failed, &expected, true, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            hs_log("Unable to reserve %zu bytes for the allocation records: %s", bytes,
                   hs_errno_text(errno));
        errno = saved;
        return NULL;
    }
    /* No MADV_HUGEPAGE: it would save about 10 ns per record on a fresh table (a fault per
     * 43690 records instead of per 85), but with the usual defrag=madvise setting such a fault
     * may compact memory synchronously, a stall of milliseconds inside some malloc. */
    struct rec *expected = NULL;
    if (!__atomic_compare_exchange_n(&g_cfg.entries, &expected, (struct rec *)p, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        munmap(p, bytes); /* another thread won the race */
        p = expected;
    }
    errno = saved;
    return p;
}

static long futex(uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* Called by an adder whose fetch_add saw WRITING: gives the place back and, unless one of its
 * own places is unfilled (it is nested in a record of its own thread, and the writer waits
 * for that one), waits for the writer and takes a place again. Returns true with the new
 * fetch_add result in *w, or false when the record must be dropped. */
static __attribute__((noinline)) bool wait_for_writer(uint64_t *w)
{
    int saved = errno;
    bool ok = true;
    for (;;) {
        __atomic_fetch_sub(&g_gate, GATE_SLOT, __ATOMIC_RELAXED);
        if (t_rec.depth > 1) {
            ok = false;
            break;
        }
        for (unsigned spins = 0;; spins++) {
            uint32_t seq = __atomic_load_n(&g_write_seq, __ATOMIC_SEQ_CST);
            if (!(__atomic_load_n(&g_gate, __ATOMIC_SEQ_CST) & GATE_WRITING))
                break;
            if (spins < 64)
                __builtin_ia32_pause();
            else
                futex(&g_write_seq, FUTEX_WAIT_PRIVATE, seq);
        }
        *w = __atomic_fetch_add(&g_gate, GATE_SLOT, __ATOMIC_ACQUIRE);
        if (!(*w & GATE_WRITING))
            break;
    }
    errno = saved;
    return ok;
}

/* Takes a place in the table. Returns its index, or HS_MD_RECORD_NO_SLOT (recording off, no
 * table, table full, nested during a write). On success the caller must fill the place in
 * (commit) or cancel it. */
static inline uint64_t take_slot(void)
{
    if (!__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED))
        return HS_MD_RECORD_NO_SLOT;
    if (__builtin_expect(t_rec.state == THREAD_NEW, 0))
        register_thread();
    struct rec *table = __atomic_load_n(&g_cfg.entries, __ATOMIC_ACQUIRE);
    if (__builtin_expect(table == NULL, 0) && reserve_table() == NULL)
        return HS_MD_RECORD_NO_SLOT;
    t_rec.depth++; /* before the fetch_add: a signal handler may interrupt right after it */
    uint64_t w = __atomic_fetch_add(&g_gate, GATE_SLOT, __ATOMIC_ACQUIRE);
    if (__builtin_expect((w & GATE_WRITING) != 0, 0) && !wait_for_writer(&w)) {
        t_rec.depth--;
        return HS_MD_RECORD_NO_SLOT;
    }
    uint64_t idx = GATE_SLOTS(w);
    if (__builtin_expect(idx >= g_cfg.num_entries, 0)) {
        t_rec.depth--;
        return HS_MD_RECORD_NO_SLOT; /* full: the place is not given back, see above */
    }
    return idx;
}

/* Publishes place idx with its type; logs when it was the last place. */
static inline void publish(uint64_t idx, struct rec *r, uint32_t type)
{
    __atomic_store_n(&r->type, type, __ATOMIC_RELEASE);
    t_rec.depth--;
    if (__builtin_expect(idx == g_cfg.num_entries - 1, 0))
        hs_log(HS_MD_RECORD_FULL_MSG);
}

static inline void commit(uint64_t idx, uint32_t type, uint64_t ptr, uint64_t arg, uint64_t size,
                          uint64_t start_ns, uint64_t end_ns)
{
    struct rec *r = &g_cfg.entries[idx];
    r->tid = t_rec.tid;
    r->ptr = ~ptr;
    r->arg = type == REC_REALLOC ? ~arg : arg;
    r->size = size;
    r->start_ns = start_ns;
    r->end_ns = end_ns;
    publish(idx, r, type);
}

static void add(uint32_t type, uint64_t ptr, uint64_t arg, uint64_t size, uint64_t start_ns)
{
    uint64_t end_ns = hs_md_record_now_ns();
    uint64_t idx = take_slot();
    if (idx != HS_MD_RECORD_NO_SLOT)
        commit(idx, type, ptr, arg, size, start_ns, end_ns);
}

void hs_md_record_malloc(const void *ptr, size_t size, uint64_t start_ns)
{
    add(REC_MALLOC, (uintptr_t)ptr, 0, size, start_ns);
}

void hs_md_record_calloc(const void *ptr, size_t nmemb, size_t size, uint64_t start_ns)
{
    add(REC_CALLOC, (uintptr_t)ptr, nmemb, size, start_ns);
}

void hs_md_record_memalign(const void *ptr, size_t alignment, size_t size, uint64_t start_ns)
{
    add(REC_MEMALIGN, (uintptr_t)ptr, alignment, size, start_ns);
}

uint64_t hs_md_record_reserve(void)
{
    return take_slot();
}

void hs_md_record_free(uint64_t slot, const void *ptr, uint64_t start_ns)
{
    if (slot != HS_MD_RECORD_NO_SLOT)
        commit(slot, REC_FREE, (uintptr_t)ptr, 0, 0, start_ns, hs_md_record_now_ns());
}

void hs_md_record_realloc(uint64_t slot, const void *new_ptr, const void *old_ptr, size_t size,
                          uint64_t start_ns)
{
    if (slot != HS_MD_RECORD_NO_SLOT)
        commit(slot, REC_REALLOC, (uintptr_t)new_ptr, (uintptr_t)old_ptr, size, start_ns,
               hs_md_record_now_ns());
}

void hs_md_record_cancel(uint64_t slot)
{
    if (slot != HS_MD_RECORD_NO_SLOT)
        publish(slot, &g_cfg.entries[slot], REC_CANCELLED);
}

/* ---- writing ---- */

/* Sets WRITING: no place is handed out until open_gate. Returns `slots` as it was. Caller
 * holds g_writer_lock. */
static uint64_t close_gate(void)
{
    return GATE_SLOTS(__atomic_fetch_or(&g_gate, GATE_WRITING, __ATOMIC_ACQUIRE));
}

/* Number of places in use for a `slots` value. */
static uint64_t used_places(uint64_t slots)
{
    return slots < g_cfg.num_entries ? slots : g_cfg.num_entries;
}

/* Waits until entry r is filled in (or cancelled). */
static void wait_ready(const struct rec *r)
{
    for (unsigned spins = 0; __atomic_load_n(&r->type, __ATOMIC_ACQUIRE) == REC_NOT_READY; spins++)
        backoff(spins);
}

/* Waits for all places below `count` to be filled in (fork: nothing is written); those below
 * g_filled_below were seen filled in before. g_writer_lock held. */
static void wait_all_ready(uint64_t count)
{
    hs_assert(count <= g_cfg.num_entries && g_filled_below <= g_cfg.num_entries);
    const struct rec *entries = __atomic_load_n(&g_cfg.entries, __ATOMIC_ACQUIRE);
    uint64_t from = g_filled_below < count ? g_filled_below : count;
    for (uint64_t i = from; i < count; i++)
        wait_ready(&entries[i]);
    g_fork_checked = count - from;
    if (count > g_filled_below)
        g_filled_below = count;
}

/* Clears WRITING; with `empty`, also empties the table: `slots` is what close_gate returned
 * and the types of the used places have been cleared. Wakes waiting adders. */
static void open_gate(uint64_t slots, bool empty)
{
    if (empty) {
        uint64_t want = slots << 1 | GATE_WRITING;
        uint64_t expected = want;
        for (unsigned spins = 0; !__atomic_compare_exchange_n(&g_gate, &expected, 0, true,
                                                              __ATOMIC_RELEASE, __ATOMIC_RELAXED);
             spins++) {
            expected = want; /* an adder is giving its place back: let it finish */
            backoff(spins);
        }
    } else {
        __atomic_fetch_and(&g_gate, ~GATE_WRITING, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(&g_write_seq, 1, __ATOMIC_SEQ_CST);
    futex(&g_write_seq, FUTEX_WAKE_PRIVATE, INT_MAX);
}

static size_t format_rec(char *buf, size_t cap, const struct rec *r)
{
    unsigned long long ptr = ~r->ptr, size = r->size;
    unsigned long long arg = r->type == REC_REALLOC ? ~r->arg : r->arg;
    unsigned long long start = r->start_ns, end = r->end_ns;
    switch (r->type) {
    case REC_MALLOC:
        return hs_format(buf, cap, "%d: malloc 0x%llx %llu %llu %llu\n", r->tid, ptr, size, start,
                         end);
    case REC_FREE:
        return hs_format(buf, cap, "%d: free 0x%llx %llu %llu\n", r->tid, ptr, start, end);
    case REC_CALLOC:
        return hs_format(buf, cap, "%d: calloc 0x%llx %llu %llu %llu %llu\n", r->tid, ptr, arg,
                         size, start, end);
    case REC_REALLOC:
        return hs_format(buf, cap, "%d: realloc 0x%llx 0x%llx %llu %llu %llu\n", r->tid, ptr, arg,
                         size, start, end);
    case REC_MEMALIGN:
        return hs_format(buf, cap, "%d: memalign 0x%llx %llu %llu %llu %llu\n", r->tid, ptr, arg,
                         size, start, end);
    case REC_THREAD_DONE:
        return hs_format(buf, cap, "%d: thread_done 0x0 %llu\n", r->tid, end);
    default:
        return 0; /* cancelled */
    }
}

static bool write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return false;
        }
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* Writes the entries [0, count) to fd as they become ready, and clears their types. Returns
 * false (errno set) on a write error; the types are cleared all the same. */
static bool write_entries(int fd, uint64_t count)
{
    struct rec *entries = __atomic_load_n(&g_cfg.entries, __ATOMIC_ACQUIRE);
    size_t len = 0;
    bool ok = true;
    for (uint64_t i = 0; i < count; i++) {
        struct rec *r = &entries[i];
        wait_ready(r);
        if (ok) {
            if (sizeof(g_write_buf) - len < 256) {
                ok = write_all(fd, g_write_buf, len);
                len = 0;
            }
            len += format_rec(g_write_buf + len, sizeof(g_write_buf) - len, r);
        }
        __atomic_store_n(&r->type, REC_NOT_READY, __ATOMIC_RELAXED);
    }
    return ok && write_all(fd, g_write_buf, len);
}

/* Writes the table to `path` and empties it (see record_allocs.h for the messages). */
static void write_table(const char *path)
{
    int saved = errno;
    hs_md_in_shim++;
    hs_spin_lock(&g_writer_lock);
    uint64_t slots = close_gate();
    uint64_t count = used_places(slots);
    bool empty = false;
    if (count == 0) {
        hs_log("No alloc entries to write.");
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            hs_log("Cannot create record alloc file %s: %s", path, hs_errno_text(errno));
        } else {
            if (!write_entries(fd, count))
                hs_log("Failed to write record alloc information to %s: %s", path,
                       hs_errno_text(errno));
            close(fd);
            empty = true;
        }
    }
    if (empty)
        g_filled_below = 0; /* the places are handed out again, from 0 */
    open_gate(slots, empty);
    hs_spin_unlock(&g_writer_lock);
    hs_md_in_shim--;
    errno = saved;
}

void hs_md_record_dump_if_requested(void)
{
    if (__builtin_expect(!__atomic_load_n(&g_dump_requested, __ATOMIC_RELAXED), 1))
        return;
    if (t_rec.depth > 0 || !__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED))
        return; /* a place of this thread is unfilled: a later call writes */
    if (__atomic_exchange_n(&g_dump_requested, 0, __ATOMIC_ACQUIRE))
        write_table(g_cfg.file);
}

void hs_md_record_write_at_exit(void)
{
    if (!__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED) || !g_cfg.on_exit || t_rec.depth > 0)
        return;
    char path[PATH_MAX + 24];
    hs_format(path, sizeof(path), "%s.%d", g_cfg.file, (int)getpid());
    write_table(path);
}

/* ---- fork ---- */

void hs_md_record_lock(void)
{
    t_fork_locked = false;
    if (!__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED) || t_rec.depth > 0)
        return;
    int saved = errno;
    hs_spin_lock(&g_writer_lock);
    g_fork.slots = close_gate();
    /* The child must not inherit places that nobody will fill in. */
    wait_all_ready(used_places(g_fork.slots));
    g_fork.pid = getpid();
    t_fork_locked = true;
    errno = saved;
}

void hs_md_record_unlock(void)
{
    if (!t_fork_locked)
        return;
    t_fork_locked = false;
    int saved = errno;
    if (getpid() != g_fork.pid) {
        /* Child: threads caught between taking and giving back a place are gone; keep the
         * records, drop their half-done give-backs. This thread has a new tid. */
        __atomic_store_n(&g_gate, g_fork.slots << 1, __ATOMIC_RELEASE);
        __atomic_store_n(&g_write_seq, 0, __ATOMIC_RELAXED);
        if (t_rec.state != THREAD_NEW)
            t_rec.tid = (int32_t)gettid();
    } else {
        open_gate(g_fork.slots, false);
    }
    hs_spin_unlock(&g_writer_lock);
    errno = saved;
}

uint64_t hs_md_record_fork_checked(void)
{
    hs_spin_lock(&g_writer_lock);
    uint64_t n = g_fork_checked;
    hs_spin_unlock(&g_writer_lock);
    return n;
}

/* ---- set-up ---- */

static void on_dump_signal(int sig, siginfo_t *info, void *uc)
{
    (void)sig;
    (void)info;
    (void)uc;
    __atomic_store_n(&g_dump_requested, 1, __ATOMIC_RELAXED);
}

bool hs_md_record_init(const struct hs_md_config *cfg)
{
    __atomic_store_n(&g_cfg.enabled, false, __ATOMIC_RELAXED);
    int sig = SIGRTMAX - 18;
    int err = hs_signal_install(sig, on_dump_signal);
    if (err != 0) {
        hs_log("Unable to set up record dump signal function: %s", hs_errno_text(err));
        return false;
    }
    if (!g_cfg.key_created) {
        err = pthread_key_create(&g_cfg.key, on_thread_exit);
        if (err != 0) {
            hs_log("Unable to create the record thread key: %s", hs_errno_text(err));
            return false;
        }
        g_cfg.key_created = true;
    }

    /* Re-initialisation (tests): drop the old table. */
    if (g_cfg.entries)
        munmap(g_cfg.entries, g_cfg.num_entries * sizeof(struct rec));
    g_cfg.entries = NULL;
    g_cfg.reserve_failed = false;
    g_filled_below = 0;
    g_fork_checked = 0;
    __atomic_store_n(&g_gate, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_dump_requested, 0, __ATOMIC_RELAXED);

    g_cfg.num_entries = cfg->record_allocs_num_entries ? cfg->record_allocs_num_entries : 1;
    g_cfg.on_exit = (cfg->options & HS_OPT_RECORD_ALLOCS_ON_EXIT) != 0;
    size_t n = strnlen(cfg->record_allocs_file, sizeof(g_cfg.file) - 1);
    memcpy(g_cfg.file, cfg->record_allocs_file, n);
    g_cfg.file[n] = '\0';

    if (cfg->options & HS_OPT_VERBOSE)
        hs_log("%s: Run: 'kill -%d %d' to dump the allocation records.", hs_log_program_name(), sig,
               (int)getpid());
    __atomic_store_n(&g_cfg.enabled, true, __ATOMIC_RELEASE);
    return true;
}

bool hs_md_record_enabled(void)
{
    return __atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED);
}
