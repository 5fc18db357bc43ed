/* ring_buffer.c: the shared ring buffer of the sampling heap profiler (see ring_buffer.h for
 * the layout, the protocol and the memory ordering of each shared field).
 *
 * The writer path (hs_rb_reserve, hs_rb_publish, hs_rb_write, hs_rb_write_retry) runs inside
 * malloc hooks and signal handlers: no allocation, no locks other than the bounded spinlock,
 * and only async-signal-safe system calls (sched_yield, clock_gettime, nanosleep).
 *
 * The reader path treats the shared area as hostile: S is its own, the read position is its
 * own, and every value read from shared memory is checked before it is used as an offset or
 * a length. Offsets are always taken modulo S and record spans never exceed S, so even a
 * wrong-but-accepted value stays inside the double mapping.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "hs_assert.h"
#include "ring_buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct hs_rb_meta) <= HS_RB_PAGE_SIZE, "metadata must fit its page");

/* Spins of the lock before the waiter starts yielding and watching the clock. */
#define LOCK_SPINS 128
/* The block_client retry interval. */
#define RETRY_INTERVAL_NS 100000

#define RELAXED __ATOMIC_RELAXED
#define ACQUIRE __ATOMIC_ACQUIRE
#define RELEASE __ATOMIC_RELEASE

/* now + ns, saturating (a huge timeout means "practically never"). */
static uint64_t deadline_after(uint64_t now, uint64_t ns)
{
    return now + ns < now ? UINT64_MAX : now + ns;
}

static uint64_t align8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

static bool valid_data_size(uint64_t size)
{
    return size >= HS_RB_MIN_SIZE && size <= HS_RB_MAX_SIZE && (size & (size - 1)) == 0;
}

static uint64_t *header_at(const struct hs_rb *rb, uint64_t pos)
{
    return (uint64_t *)(rb->data + (pos & (rb->size - 1)));
}

/* ---- Mapping ---- */

/* Maps the metadata page and the data area, the data area twice, into one reserved range. */
static int map_double(struct hs_rb *rb, int fd, uint64_t size)
{
    size_t len = HS_RB_PAGE_SIZE + 2 * (size_t)size;
    uint8_t *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return -errno;
    /* Both views replace parts of the reservation, so nothing else can land in between. */
    if (mmap(base, HS_RB_PAGE_SIZE + size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED ||
        mmap(base + HS_RB_PAGE_SIZE + size, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
             fd, HS_RB_PAGE_SIZE) == MAP_FAILED) {
        int err = errno;
        munmap(base, len);
        return -err;
    }
    memset(rb, 0, sizeof(*rb));
    rb->map_base = base;
    rb->map_len = len;
    rb->meta = (struct hs_rb_meta *)base;
    rb->data = base + HS_RB_PAGE_SIZE;
    rb->size = size;
    rb->fd = -1;
    rb->lock_timeout_ns = HS_RB_DEFAULT_LOCK_TIMEOUT_NS;
    rb->stall_timeout_ns = HS_RB_DEFAULT_STALL_TIMEOUT_NS;
    return 0;
}

int hs_rb_create(struct hs_rb *rb, size_t data_size)
{
    memset(rb, 0, sizeof(*rb));
    rb->fd = -1;
    if (!valid_data_size(data_size))
        return -EINVAL;
    int fd = memfd_create("heapscope_ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int err = 0;
    if (ftruncate(fd, (off_t)(HS_RB_PAGE_SIZE + data_size)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        err = -errno;
    if (err == 0)
        err = map_double(rb, fd, data_size);
    if (err != 0) {
        close(fd);
        return err;
    }
    rb->fd = fd;
    return 0;
}

int hs_rb_attach(struct hs_rb *rb, int fd)
{
    memset(rb, 0, sizeof(*rb));
    rb->fd = -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return -EBADF;
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)HS_RB_PAGE_SIZE ||
        !valid_data_size((uint64_t)st.st_size - HS_RB_PAGE_SIZE))
        return -EINVAL;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return -EINVAL; /* not a memfd */
    if (!(seals & F_SEAL_SHRINK))
        return -EPERM;
    int err = map_double(rb, fd, (uint64_t)st.st_size - HS_RB_PAGE_SIZE);
    if (err != 0)
        return err;
    /* Start where the shared read position says; it is checked like everything else. */
    rb->read_pos = __atomic_load_n(&rb->meta->read_pos, RELAXED);
    rb->write_pos_seen = rb->read_pos;
    return 0;
}

void hs_rb_destroy(struct hs_rb *rb)
{
    /* A zeroed struct has fd 0, which is not ours: only a mapped buffer owns its fd. */
    if (rb->map_base) {
        munmap(rb->map_base, rb->map_len);
        if (rb->fd >= 0)
            close(rb->fd);
    }
    memset(rb, 0, sizeof(*rb));
    rb->fd = -1;
}

/* ---- Both sides ---- */

void hs_rb_poison(struct hs_rb *rb, enum hs_rb_status why)
{
    uint32_t none = 0;
    __atomic_compare_exchange_n(&rb->meta->error, &none, (uint32_t)why, false, RELAXED, RELAXED);
    __atomic_fetch_or(&rb->meta->lock, HS_RB_LOCK_POISONED, RELAXED);
}

void hs_rb_set_shutdown(struct hs_rb *rb)
{
    __atomic_store_n(&rb->meta->shutdown, 1, RELAXED);
}

enum hs_rb_status hs_rb_error(const struct hs_rb *rb)
{
    return (enum hs_rb_status)__atomic_load_n(&rb->meta->error, RELAXED);
}

void hs_rb_get_stats(const struct hs_rb *rb, struct hs_rb_stats *st)
{
    const struct hs_rb_meta *m = rb->meta;
    st->read_pos = __atomic_load_n(&m->read_pos, RELAXED);
    st->write_pos = __atomic_load_n(&m->write_pos, RELAXED);
    st->overflows = __atomic_load_n(&m->overflows, RELAXED);
    st->spinlock_waits = __atomic_load_n(&m->spinlock_waits, RELAXED);
    st->failed_spinlocks = __atomic_load_n(&m->failed_spinlocks, RELAXED);
    st->error = (enum hs_rb_status)__atomic_load_n(&m->error, RELAXED);
    st->shutdown = __atomic_load_n(&m->shutdown, RELAXED) != 0;
    st->poisoned = (__atomic_load_n(&m->lock, RELAXED) & HS_RB_LOCK_POISONED) != 0;
    st->reader_paused = __atomic_load_n(&m->reader_paused, RELAXED) != 0;
}

uint64_t hs_rb_used(const struct hs_rb *rb)
{
    uint64_t w = __atomic_load_n(&rb->meta->write_pos, RELAXED);
    uint64_t r = __atomic_load_n(&rb->meta->read_pos, RELAXED);
    return w - r > rb->size ? rb->size : w - r;
}

uint64_t hs_rb_write_pos(const struct hs_rb *rb)
{
    return __atomic_load_n(&rb->meta->write_pos, __ATOMIC_ACQUIRE);
}

bool hs_rb_read_reached(const struct hs_rb *rb, uint64_t pos)
{
    return (int64_t)(__atomic_load_n(&rb->meta->read_pos, __ATOMIC_ACQUIRE) - pos) >= 0;
}

const char *hs_rb_status_text(enum hs_rb_status st)
{
    switch (st) {
    case HS_RB_OK:
        return "ok";
    case HS_RB_EMPTY:
        return "empty";
    case HS_RB_PENDING:
        return "record not yet published";
    case HS_RB_FULL:
        return "buffer full";
    case HS_RB_TOO_BIG:
        return "record larger than the buffer";
    case HS_RB_LOCK_TIMEOUT:
        return "spinlock timed out";
    case HS_RB_POISONED:
        return "buffer poisoned";
    case HS_RB_SHUTDOWN:
        return "shutting down";
    case HS_RB_CORRUPT:
        return "corrupt buffer";
    case HS_RB_STALLED:
        return "record never published (writer stalled or died)";
    }
    return "unknown";
}

/* ---- Writer side ---- */

void hs_rb_set_lock_timeout(struct hs_rb *rb, uint64_t ns)
{
    rb->lock_timeout_ns = ns;
}

/* Takes the lock, or gives up after lock_timeout_ns (a holder that died, or that this very
 * thread interrupted with a signal, must not hang us). */
static enum hs_rb_status lock_acquire(struct hs_rb *rb)
{
    uint32_t *lock = &rb->meta->lock;
    uint32_t seen = 0;
    if (__builtin_expect(
            __atomic_compare_exchange_n(lock, &seen, HS_RB_LOCK_HELD, false, ACQUIRE, RELAXED), 1))
        return HS_RB_OK;
    if (seen & HS_RB_LOCK_POISONED)
        return HS_RB_POISONED;
    __atomic_fetch_add(&rb->meta->spinlock_waits, 1, RELAXED);
    uint64_t deadline = 0;
    for (unsigned i = 1;; i++) {
        seen = __atomic_load_n(lock, RELAXED);
        if (seen & HS_RB_LOCK_POISONED)
            return HS_RB_POISONED;
        if (seen == 0 &&
            __atomic_compare_exchange_n(lock, &seen, HS_RB_LOCK_HELD, false, ACQUIRE, RELAXED))
            return HS_RB_OK;
        if (i < LOCK_SPINS) {
            __builtin_ia32_pause();
            continue;
        }
        /* The holder may be preempted: let it run, and watch the clock. */
        sched_yield();
        uint64_t now = hs_monotonic_ns();
        if (deadline == 0) {
            deadline = deadline_after(now, rb->lock_timeout_ns);
        } else if (now >= deadline) {
            __atomic_fetch_add(&rb->meta->failed_spinlocks, 1, RELAXED);
            return HS_RB_LOCK_TIMEOUT;
        }
    }
}

static void lock_release(struct hs_rb *rb)
{
    /* Clears only our bit: a poisoning that happened meanwhile stays. */
    __atomic_fetch_and(&rb->meta->lock, ~HS_RB_LOCK_HELD, RELEASE);
}

enum hs_rb_status hs_rb_reserve(struct hs_rb *rb, size_t len, struct hs_rb_reservation *res)
{
    struct hs_rb_meta *m = rb->meta;
    if (len > rb->size - HS_RB_HEADER_SIZE)
        return HS_RB_TOO_BIG;
    if (__atomic_load_n(&m->shutdown, RELAXED))
        return HS_RB_SHUTDOWN;
    enum hs_rb_status st = lock_acquire(rb);
    if (st != HS_RB_OK)
        return st;

    uint64_t w = __atomic_load_n(&m->write_pos, RELAXED); /* only lock holders write it */
    uint64_t r = __atomic_load_n(&m->read_pos, ACQUIRE);  /* the reader is done below r */
    uint64_t used = w - r;
    if (used > rb->size || ((w | r) & 7) != 0) {
        lock_release(rb);
        hs_rb_poison(rb, HS_RB_CORRUPT);
        return HS_RB_CORRUPT;
    }
    uint64_t span = align8(HS_RB_HEADER_SIZE + len);
    if (span > rb->size - used) {
        __atomic_fetch_add(&m->overflows, 1, RELAXED);
        lock_release(rb);
        return HS_RB_FULL;
    }
    /* read_pos <= write_pos <= read_pos + S holds after the reservation too. */
    hs_assert(used + span <= rb->size && (span & 7) == 0);
    uint64_t *header = header_at(rb, w);
    __atomic_store_n(header, 0, RELAXED);               /* "not ready" ... */
    __atomic_store_n(&m->write_pos, w + span, RELEASE); /* ... before the reader sees it */
    lock_release(rb);

    res->header = header;
    res->data = header + 1;
    res->len = len;
    return HS_RB_OK;
}

bool hs_rb_publish(struct hs_rb *rb, const struct hs_rb_reservation *res)
{
    __atomic_store_n(res->header, HS_RB_HEADER_SIZE + (uint64_t)res->len, RELEASE);
    /* Pairs with the fence in hs_rb_reader_pause: either the reader sees this record, or we
     * see its flag. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint32_t *paused = &rb->meta->reader_paused;
    return __atomic_load_n(paused, RELAXED) != 0 && __atomic_exchange_n(paused, 0, RELAXED) != 0;
}

enum hs_rb_status hs_rb_write(struct hs_rb *rb, const void *buf, size_t len, bool *wake_reader)
{
    struct hs_rb_reservation res;
    *wake_reader = false;
    enum hs_rb_status st = hs_rb_reserve(rb, len, &res);
    if (st != HS_RB_OK)
        return st;
    memcpy(res.data, buf, len);
    *wake_reader = hs_rb_publish(rb, &res);
    return HS_RB_OK;
}

enum hs_rb_status hs_rb_write_retry(struct hs_rb *rb, const void *buf, size_t len,
                                    uint64_t timeout_ns, bool *wake_reader)
{
    uint64_t deadline = 0;
    for (;;) {
        enum hs_rb_status st = hs_rb_write(rb, buf, len, wake_reader);
        if (st != HS_RB_FULL)
            return st;
        uint64_t now = hs_monotonic_ns();
        if (deadline == 0)
            deadline = deadline_after(now, timeout_ns);
        else if (now >= deadline)
            return HS_RB_FULL;
        struct timespec ts = {0, RETRY_INTERVAL_NS};
        nanosleep(&ts, NULL);
    }
}

/* ---- Reader side ---- */

void hs_rb_set_stall_timeout(struct hs_rb *rb, uint64_t ns)
{
    rb->stall_timeout_ns = ns;
}

static enum hs_rb_status give_up(struct hs_rb *rb, enum hs_rb_status why)
{
    rb->broken = why;
    rb->peeked_span = 0;
    hs_rb_poison(rb, why);
    return why;
}

/* The state of the next record: HS_RB_OK (published, *header_out set to its header value,
 * already validated), HS_RB_EMPTY, HS_RB_PENDING or HS_RB_CORRUPT. write_pos is loaded again
 * only when the reader has caught up with the last value it saw (or when `reload`): the line
 * it sits on is the writers' busiest. Records below a write position once seen stay
 * reserved, so the old value is as good as a new one for them. */
static enum hs_rb_status head_state(struct hs_rb *rb, bool reload, uint64_t *header_out)
{
    uint64_t r = rb->read_pos;
    uint64_t w = rb->write_pos_seen;
    if (reload || w == r) {
        w = __atomic_load_n(&rb->meta->write_pos, ACQUIRE);
        rb->write_pos_seen = w;
    }
    if (w == r)
        return HS_RB_EMPTY;
    /* Behind us (a huge difference), more than S ahead, or misaligned: impossible. */
    uint64_t avail = w - r;
    if (avail > rb->size || ((avail | r) & 7) != 0)
        return HS_RB_CORRUPT;
    uint64_t h = __atomic_load_n(header_at(rb, r), ACQUIRE);
    if (h == 0)
        return HS_RB_PENDING;
    if (h < HS_RB_HEADER_SIZE || h > avail || align8(h) > avail)
        return HS_RB_CORRUPT;
    *header_out = h;
    return HS_RB_OK;
}

enum hs_rb_status hs_rb_peek(struct hs_rb *rb, struct hs_rb_record *rec)
{
    if (rb->broken != HS_RB_OK)
        return rb->broken;
    uint64_t h = 0;
    enum hs_rb_status st = head_state(rb, false, &h);
    switch (st) {
    case HS_RB_OK:
        rb->pending_seen = false;
        rb->peeked_span = align8(h);
        rec->data = header_at(rb, rb->read_pos) + 1;
        rec->len = (size_t)(h - HS_RB_HEADER_SIZE);
        return HS_RB_OK;
    case HS_RB_PENDING: {
        uint64_t now = hs_monotonic_ns();
        if (!rb->pending_seen || rb->pending_pos != rb->read_pos) {
            rb->pending_seen = true;
            rb->pending_pos = rb->read_pos;
            rb->pending_since_ns = now;
        } else if (now - rb->pending_since_ns >= rb->stall_timeout_ns) {
            return give_up(rb, HS_RB_STALLED);
        }
        rb->peeked_span = 0;
        return HS_RB_PENDING;
    }
    case HS_RB_CORRUPT:
        return give_up(rb, HS_RB_CORRUPT);
    default:
        rb->peeked_span = 0;
        return st;
    }
}

void hs_rb_consume(struct hs_rb *rb)
{
    if (rb->peeked_span == 0)
        return;
    /* The span head_state validated when the record was peeked: whole 8-byte units, within
     * the data area. (Not write_pos_seen: hs_rb_reader_pause may have reloaded it since from
     * a hostile peer, and a peer's values get HS_RB_CORRUPT, never an assertion.) */
    hs_assert((rb->peeked_span & 7) == 0 && rb->peeked_span <= rb->size);
    rb->read_pos += rb->peeked_span;
    rb->peeked_span = 0;
    /* The caller is done with the record: writers may reuse its space. */
    __atomic_store_n(&rb->meta->read_pos, rb->read_pos, RELEASE);
}

bool hs_rb_reader_pause(struct hs_rb *rb)
{
    uint32_t *paused = &rb->meta->reader_paused;
    __atomic_store_n(paused, 1, RELAXED);
    /* Pairs with the fence in hs_rb_publish. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint64_t h;
    enum hs_rb_status st = rb->broken != HS_RB_OK ? rb->broken : head_state(rb, true, &h);
    /* Empty: the next writer will see the flag. Pending: so will the one publishing it. */
    if (st == HS_RB_EMPTY || st == HS_RB_PENDING)
        return true;
    __atomic_store_n(paused, 0, RELAXED);
    return false;
}

void hs_rb_reader_resume(struct hs_rb *rb)
{
    __atomic_store_n(&rb->meta->reader_paused, 0, RELAXED);
}
