/* record_allocs.c: the allocation recorder (see record_allocs.h for the file format).
 *
 * The table. A fixed array of `struct rec` (48 bytes) reserved with mmap(MAP_NORESERVE) on
 * the first record, so record_allocs=50000000 costs 2.4 GB of address space but only the
 * pages records touch.
 *
 * The gate. Adders and the writer meet on one 64-bit word:
 *     bits 63..32  slots: places handed out in the table since it was last emptied
 *     bit  31      WRITING: a writer (signal dump, exit dump, fork) holds the table
 *     bits 30..0   in_flight: adders between taking a place and filling it in
 * An adder takes a place and announces itself with ONE fetch_add of (1 << 32 | 1): the old
 * slots value is its index. It fills the entry in and leaves with a release fetch_sub of 1
 * (or of (1 << 32 | 1) when the index was past the end: a dropped record gives its slot back,
 * so the counter stays below num_entries + number of threads and can never wrap). So a record
 * costs two uncontended read-modify-writes of one cache line plus a clock read.
 *
 * A writer sets WRITING with fetch_or, then waits for in_flight to reach 0. From then on
 * every place below `slots` has been filled in (the adders' release decrements form a release
 * sequence that the writer's acquire load reads from), and no new place is handed out: an
 * adder that sees WRITING in its fetch_add result gives the place back at once (fetch_sub),
 * then sleeps on a futex until the writer is done and tries again. Its give-back makes the
 * word move for an instant, so the writer empties the table with a compare-and-swap from
 * exactly (slots << 32 | WRITING) to 0, retried until no adder is between its two operations.
 * Keeping the records (the file could not be opened) is a plain fetch_sub of WRITING.
 *
 * Why not the alternatives: a spinlock around the append is one exchange instead of two
 * read-modify-writes, but a signal handler that allocates while its thread holds it
 * deadlocks, and its waiters spin; per-entry "ready" flags with a bounded wait let the writer
 * reset the counter while a slow adder still owns a place, which then collides with the
 * next adder of that index. With the gate the writer needs no timeout and nothing is lost or
 * written twice; entries carry their type as the last field written, and a zero type (a
 * cancelled reservation) is skipped.
 *
 * Invariants: only a writer holding g_writer_lock sets or clears WRITING; an adder never
 * waits while it is itself in flight (nested records, from a signal handler interrupting a
 * record, are dropped while WRITING is set); the writer never records (hs_md_in_shim is up,
 * so allocations made by open/write go straight to glibc).
 *
 * Thread exit. The first record of a thread stores a non-NULL value under a pthread key
 * (under hs_md_in_shim in case pthread_setspecific allocates). The key's destructor stores
 * itself again until the last destructor round (PTHREAD_DESTRUCTOR_ITERATIONS), so that
 * allocations made by other keys' destructors come before the thread_done record.
 *
 * Signals: the SIGRTMAX-18 handler only sets g_dump_requested; the next malloc/free writes.
 */
#define _GNU_SOURCE
#include "record_allocs.h"

#include "debug_state.h"
#include "format.h"
#include "log.h"
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
    REC_NONE = 0, /* never filled in, or cancelled */
    REC_MALLOC,
    REC_FREE,
    REC_CALLOC,
    REC_REALLOC,
    REC_MEMALIGN,
    REC_THREAD_DONE,
};

struct rec {
    uint32_t type; /* enum rec_type, stored last */
    int32_t tid;
    uint64_t ptr;
    uint64_t arg; /* realloc: old pointer; calloc: nmemb; memalign: alignment */
    uint64_t size;
    uint64_t start_ns, end_ns;
};

#define GATE_IN_FLIGHT_ONE 1ull
#define GATE_IN_FLIGHT_MASK 0x7fffffffull
#define GATE_WRITING (1ull << 31)
#define GATE_SLOT_ONE (1ull << 32)
#define GATE_SLOTS(w) ((w) >> 32)
#define GATE_TAKE (GATE_SLOT_ONE | GATE_IN_FLIGHT_ONE)

/* Read on every record; written by init only (and `entries` once by the first record). */
static struct {
    bool enabled;
    bool on_exit;
    struct rec *entries; /* NULL until the first record */
    bool reserve_failed; /* mmap failed: stop trying */
    size_t num_entries;
    pthread_key_t key;
    bool key_created;
    char file[PATH_MAX];
} g_cfg __attribute__((aligned(64)));

/* The gate word, alone on its cache line. */
static uint64_t g_gate __attribute__((aligned(64)));

/* Futex word bumped after each write, for adders that waited on WRITING. */
static uint32_t g_write_seq __attribute__((aligned(64)));

/* Set by the signal handler, read at each malloc/free: its own line, never written otherwise. */
static int g_dump_requested __attribute__((aligned(64)));

/* Serialises writers (signal dump, exit dump, fork prepare); never taken by adders. */
static hs_spinlock g_writer_lock = HS_SPINLOCK_INIT;

/* Fork: what hs_md_record_lock saw, for hs_md_record_unlock. */
static struct {
    bool locked;
    pid_t pid;
    uint64_t slots;
} g_fork;

/* Output buffer of the writer (only the holder of g_writer_lock uses it): static because a
 * write can run on a small thread stack. */
static char g_write_buf[64 * 1024];

/* Per thread: cached tid (0: not registered yet), record nesting depth. */
enum { THREAD_NEW = 0, THREAD_REGISTERED, THREAD_DONE };
static __thread struct {
    int32_t tid;
    int state;
    int depth; /* > 0 between taking a place and leaving the gate */
} t_rec __attribute__((tls_model("initial-exec")));

uint64_t hs_md_record_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *error_text(int err)
{
    /* strerrordesc_np never allocates or translates: the right thing inside malloc. */
    const char *s = strerrordesc_np(err);
    return s ? s : "Unknown error";
}

/* ---- threads ---- */

static void record_thread_done(void);

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
    if (__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED))
        record_thread_done();
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
                   error_text(errno));
        errno = saved;
        return NULL;
    }
    struct rec *expected = NULL;
    if (!__atomic_compare_exchange_n(&g_cfg.entries, &expected, (struct rec *)p, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        munmap(p, bytes); /* another thread won the race */
        p = expected;
    }
    errno = saved;
    return p;
}

static inline struct rec *table(void)
{
    struct rec *t = __atomic_load_n(&g_cfg.entries, __ATOMIC_ACQUIRE);
    return __builtin_expect(t != NULL, 1) ? t : reserve_table();
}

static long futex(uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* Called by an adder whose fetch_add saw WRITING: gives the place back and, unless nested in
 * a record of its own thread, waits for the writer and takes a place again. Returns true with
 * the new fetch_add result in *w, or false when the record must be dropped (nested). */
static __attribute__((noinline)) bool wait_for_writer(uint64_t *w)
{
    for (;;) {
        __atomic_fetch_sub(&g_gate, GATE_TAKE, __ATOMIC_RELEASE);
        if (t_rec.depth > 1)
            return false; /* our own outer record is in flight: the writer waits for us */
        int saved = errno;
        for (unsigned spins = 0;; spins++) {
            uint32_t seq = __atomic_load_n(&g_write_seq, __ATOMIC_SEQ_CST);
            if (!(__atomic_load_n(&g_gate, __ATOMIC_SEQ_CST) & GATE_WRITING))
                break;
            if (spins < 64)
                __builtin_ia32_pause();
            else
                futex(&g_write_seq, FUTEX_WAIT_PRIVATE, seq);
        }
        errno = saved;
        *w = __atomic_fetch_add(&g_gate, GATE_TAKE, __ATOMIC_ACQUIRE);
        if (!(*w & GATE_WRITING))
            return true;
    }
}

/* Takes a place in the table. Returns its index, or HS_MD_RECORD_NO_SLOT (off, table
 * missing or full, nested during a write). On success the caller is in flight and must call
 * commit() or cancel(). */
static inline uint64_t take_slot(void)
{
    if (!__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED))
        return HS_MD_RECORD_NO_SLOT;
    if (__builtin_expect(t_rec.state == THREAD_NEW, 0))
        register_thread();
    if (__builtin_expect(table() == NULL, 0))
        return HS_MD_RECORD_NO_SLOT;
    t_rec.depth++;
    uint64_t w = __atomic_fetch_add(&g_gate, GATE_TAKE, __ATOMIC_ACQUIRE);
    if (__builtin_expect((w & GATE_WRITING) != 0, 0) && !wait_for_writer(&w)) {
        t_rec.depth--;
        return HS_MD_RECORD_NO_SLOT;
    }
    uint64_t idx = GATE_SLOTS(w);
    if (__builtin_expect(idx < g_cfg.num_entries, 1))
        return idx;
    __atomic_fetch_sub(&g_gate, GATE_TAKE, __ATOMIC_RELEASE); /* full: give it back */
    t_rec.depth--;
    return HS_MD_RECORD_NO_SLOT;
}

/* Leaves the gate after filling slot idx in (or leaving it empty). */
static inline void leave(uint64_t idx)
{
    __atomic_fetch_sub(&g_gate, GATE_IN_FLIGHT_ONE, __ATOMIC_RELEASE);
    t_rec.depth--;
    if (__builtin_expect(idx == g_cfg.num_entries - 1, 0))
        hs_log(HS_MD_RECORD_FULL_MSG);
}

static inline void commit(uint64_t idx, uint32_t type, uint64_t ptr, uint64_t arg, uint64_t size,
                          uint64_t start_ns, uint64_t end_ns)
{
    struct rec *r = &g_cfg.entries[idx];
    r->tid = t_rec.tid;
    r->ptr = ptr;
    r->arg = arg;
    r->size = size;
    r->start_ns = start_ns;
    r->end_ns = end_ns;
    __atomic_store_n(&r->type, type, __ATOMIC_RELEASE);
    leave(idx);
}

static inline void add(uint32_t type, uint64_t ptr, uint64_t arg, uint64_t size,
                       uint64_t start_ns)
{
    uint64_t end_ns = hs_md_record_now_ns();
    uint64_t idx = take_slot();
    if (idx != HS_MD_RECORD_NO_SLOT)
        commit(idx, type, ptr, arg, size, start_ns, end_ns);
}

static void record_thread_done(void)
{
    add(REC_THREAD_DONE, 0, 0, 0, 0);
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
    if (slot == HS_MD_RECORD_NO_SLOT)
        return;
    __atomic_store_n(&g_cfg.entries[slot].type, REC_NONE, __ATOMIC_RELAXED);
    leave(slot);
}

/* ---- writing ---- */

/* Sets WRITING and waits until every place handed out is filled in. Returns the number of
 * places. Caller holds g_writer_lock. */
static uint64_t close_gate(void)
{
    __atomic_fetch_or(&g_gate, GATE_WRITING, __ATOMIC_ACQUIRE);
    uint64_t w;
    for (unsigned spins = 0; (w = __atomic_load_n(&g_gate, __ATOMIC_ACQUIRE)) & GATE_IN_FLIGHT_MASK;
         spins++) {
        if (spins < 128)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
    return GATE_SLOTS(w);
}

/* Clears WRITING, emptying the table (its `slots` places) when `empty`, and wakes adders. */
static void open_gate(uint64_t slots, bool empty)
{
    if (empty) {
        uint64_t want = slots << 32 | GATE_WRITING;
        uint64_t expected = want;
        for (unsigned spins = 0; !__atomic_compare_exchange_n(&g_gate, &expected, 0, true,
                                                              __ATOMIC_RELEASE, __ATOMIC_RELAXED);
             spins++) {
            expected = want; /* an adder is giving its place back: let it finish */
            if (spins < 128)
                __builtin_ia32_pause();
            else
                sched_yield();
        }
    } else {
        __atomic_fetch_sub(&g_gate, GATE_WRITING, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(&g_write_seq, 1, __ATOMIC_SEQ_CST);
    int saved = errno;
    futex(&g_write_seq, FUTEX_WAKE_PRIVATE, INT_MAX);
    errno = saved;
}

static size_t format_rec(char *buf, size_t cap, const struct rec *r)
{
    unsigned long long ptr = r->ptr, arg = r->arg, size = r->size;
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
        return 0;
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

/* Writes entries [0, count) to fd. Returns false (errno set) on a write error. */
static bool write_entries(int fd, uint64_t count)
{
    const struct rec *entries = __atomic_load_n(&g_cfg.entries, __ATOMIC_ACQUIRE);
    size_t len = 0;
    for (uint64_t i = 0; i < count; i++) {
        const struct rec *r = &entries[i];
        if (__atomic_load_n(&r->type, __ATOMIC_ACQUIRE) == REC_NONE)
            continue;
        if (sizeof(g_write_buf) - len < 256) {
            if (!write_all(fd, g_write_buf, len))
                return false;
            len = 0;
        }
        len += format_rec(g_write_buf + len, sizeof(g_write_buf) - len, r);
    }
    return write_all(fd, g_write_buf, len);
}

/* Writes the table to `path` and empties it (see record_allocs.h for the messages). */
static void write_table(const char *path)
{
    int saved = errno;
    hs_md_in_shim++;
    hs_spin_lock(&g_writer_lock);
    uint64_t count = close_gate();
    bool empty = false;
    if (count == 0) {
        hs_log("No alloc entries to write.");
    } else {
        int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            hs_log("Cannot create record alloc file %s: %s", path, error_text(errno));
        } else {
            if (!write_entries(fd, count))
                hs_log("Failed to write record alloc information: %s", error_text(errno));
            close(fd);
            empty = true;
        }
    }
    open_gate(count, empty);
    hs_spin_unlock(&g_writer_lock);
    hs_md_in_shim--;
    errno = saved;
}

void hs_md_record_dump_if_requested(void)
{
    if (__builtin_expect(!__atomic_load_n(&g_dump_requested, __ATOMIC_RELAXED), 1))
        return;
    if (t_rec.depth > 0 || !__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED))
        return; /* inside a record of this thread: a later call writes */
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
    g_fork.locked = false;
    if (!__atomic_load_n(&g_cfg.enabled, __ATOMIC_RELAXED) || t_rec.depth > 0)
        return;
    hs_spin_lock(&g_writer_lock);
    g_fork.slots = close_gate();
    g_fork.pid = getpid();
    g_fork.locked = true;
}

void hs_md_record_unlock(void)
{
    if (!g_fork.locked)
        return;
    g_fork.locked = false;
    if (getpid() != g_fork.pid) {
        /* Child: threads caught between their two gate operations are gone; keep the records
         * and drop their half-done give-backs. This thread has a new tid. */
        __atomic_store_n(&g_gate, g_fork.slots << 32, __ATOMIC_RELEASE);
        if (t_rec.state != THREAD_NEW)
            t_rec.tid = (int32_t)gettid();
        __atomic_store_n(&g_write_seq, 0, __ATOMIC_RELAXED);
    } else {
        open_gate(g_fork.slots, false);
    }
    hs_spin_unlock(&g_writer_lock);
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
    struct sigaction act;
    memset(&act, 0, sizeof(act));
    act.sa_sigaction = on_dump_signal;
    act.sa_flags = SA_RESTART | SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, NULL) != 0) {
        hs_log("Unable to set up record dump signal function: %s", error_text(errno));
        return false;
    }
    if (!g_cfg.key_created) {
        int err = pthread_key_create(&g_cfg.key, on_thread_exit);
        if (err != 0) {
            hs_log("Unable to create the record thread key: %s", error_text(err));
            return false;
        }
        g_cfg.key_created = true;
    }

    /* Re-initialisation (tests): drop the old table. */
    if (g_cfg.entries)
        munmap(g_cfg.entries, g_cfg.num_entries * sizeof(struct rec));
    g_cfg.entries = NULL;
    g_cfg.reserve_failed = false;
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
