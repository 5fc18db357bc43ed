/* ring_buffer.h: the shared ring buffer of the sampling heap profiler (heapprofd port).
 *
 * The client preloaded into the profiled process writes malloc samples and free batches into
 * this buffer; the daemon reads them. Many writers (every thread of the client, and of its
 * forked children, which share the mapping), one reader (the daemon).
 *
 * Shared area: one memfd holding a metadata page followed by a data area of S bytes (S a
 * power of two, a multiple of the page size). The data area is mapped twice, back to back,
 * so that a record starting near its end continues into the second view: every record is one
 * contiguous range of memory, whatever its position.
 *
 *     [ metadata page ][ data, S bytes ][ data again, S bytes ]
 *
 * Records: each starts at an 8-byte aligned offset with an 8-byte header holding the record's
 * size in bytes, header included (so at least 8); the payload follows, and the next record
 * starts at the next multiple of 8. A header of 0 means "reserved, not yet published".
 *
 * Positions: write_pos and read_pos are 64-bit byte counts that only grow (the offset in the
 * data area is the position modulo S). Invariant kept by honest writers and the reader:
 * read_pos <= write_pos <= read_pos + S, both multiples of 8.
 *
 * Writing: a writer takes the spinlock (a bounded spin: it gives up rather than deadlock, so
 * a signal handler or a forked child can write), checks for room, zeroes the header of its
 * record and advances write_pos, releases the lock, copies its payload in without the lock,
 * then publishes the record by storing the real size into the header. No allocation, no
 * system call other than sched_yield/clock_gettime while waiting for the lock: usable inside
 * malloc hooks and signal handlers.
 *
 * Reading: the reader never takes the lock. It keeps its own read position, and its own copy
 * of S (from fstat, never from the metadata page). Everything in the shared area is hostile
 * input on the daemon side: the reader validates positions and headers and reports
 * HS_RB_CORRUPT (a broken client) instead of reading out of bounds or looping. A record that
 * stays reserved but unpublished (its writer died or hangs) stops the reader at that record;
 * after a timeout the reader gives up with HS_RB_STALLED.
 *
 * Wake-ups: the reader sets reader_paused before it sleeps; a writer that publishes a record
 * and finds the flag set clears it and tells its caller to wake the reader (the client sends
 * a byte on its socket). A seq_cst fence on each side makes sure a record published while
 * the reader goes to sleep is never missed (see hs_rb_reader_pause).
 *
 * Failure states, shared by both sides: the lock can be poisoned (then every writer fails at
 * once with HS_RB_POISONED), and an error code records why (the first one wins). Shutdown
 * makes writers fail with HS_RB_SHUTDOWN.
 *
 * Memory ordering of the shared fields (struct hs_rb_meta):
 *   lock         CAS acquire to take, fetch_and release to drop, fetch_or to poison. Guards
 *                write_pos updates and overflows: every writer's reservation is ordered.
 *   write_pos    written only by lock holders, release (after the new record's zeroed
 *                header); read by the reader with acquire, so a header it sees below
 *                write_pos is either 0 or a published size. The reader loads it again only
 *                when it has caught up with the value it last saw.
 *   read_pos     written only by the reader, release (after it is done with the records
 *                below it); read by writers with acquire before reusing that space.
 *   header       zeroed (relaxed) by its writer before the release of write_pos; the size
 *                is stored with release after the payload; read by the reader with acquire.
 *   reader_paused stored by the reader then seq_cst fence then the reader looks at the head;
 *                writers: publish, seq_cst fence, load; exchange to clear (one wake-up).
 *   shutdown, error, counters: relaxed (flags and statistics, no data depends on them).
 */
#ifndef HEAPSCOPE_PROFILER_RING_BUFFER_H
#define HEAPSCOPE_PROFILER_RING_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HS_RB_PAGE_SIZE 4096u
#define HS_RB_HEADER_SIZE 8u
/* Data area sizes: a power of two, a multiple of the page size, at most 500 MiB (so the
 * largest usable size is 256 MiB). */
#define HS_RB_DEFAULT_SIZE (8u << 20)
#define HS_RB_MIN_SIZE HS_RB_PAGE_SIZE
#define HS_RB_MAX_SIZE (500u << 20)

/* How long a writer waits for the lock before it gives up (HS_RB_LOCK_TIMEOUT). */
#define HS_RB_DEFAULT_LOCK_TIMEOUT_NS 10000000ull /* 10 ms */
/* How long the reader waits on an unpublished record before it gives up (HS_RB_STALLED). */
#define HS_RB_DEFAULT_STALL_TIMEOUT_NS 2000000000ull /* 2 s */

enum hs_rb_status {
    HS_RB_OK = 0,
    HS_RB_EMPTY,        /* reader: nothing to read */
    HS_RB_PENDING,      /* reader: the next record is reserved but not yet published */
    HS_RB_FULL,         /* writer: not enough room (counted in overflows) */
    HS_RB_TOO_BIG,      /* writer: the record can never fit (payload > S - 8) */
    HS_RB_LOCK_TIMEOUT, /* writer: the lock stayed held too long (counted) */
    HS_RB_POISONED,     /* writer: the buffer was given up (see hs_rb_error) */
    HS_RB_SHUTDOWN,     /* writer: the session is shutting down */
    HS_RB_CORRUPT,      /* positions or a header are impossible: broken or hostile peer */
    HS_RB_STALLED,      /* reader: a record stayed unpublished past the stall timeout */
};

/* Bytes of the metadata page left to the reader's notes (struct hs_rb_meta). */
#define HS_RB_READER_NOTES_SIZE 3840u

/* The metadata page. Only the ring buffer code touches it; the layout is the protocol
 * between client and daemon. Each group sits on its own cache line. */
struct hs_rb_meta {
    /* Writers' line. */
    uint32_t lock; /* HS_RB_LOCK_HELD | HS_RB_LOCK_POISONED bits */
    uint32_t shutdown;
    uint64_t write_pos;
    /* Reader's line. */
    uint64_t read_pos __attribute__((aligned(64)));
    uint32_t reader_paused;
    /* Flags and statistics. */
    /* Why the buffer was given up: an enum hs_rb_status, 0 = not given up. */
    uint32_t error __attribute__((aligned(64)));
    /* Writes refused with HS_RB_FULL. */
    uint64_t overflows;
    /* Lock acquisitions that found the lock held, and those given up (HS_RB_LOCK_TIMEOUT). */
    uint64_t spinlock_waits;
    uint64_t failed_spinlocks;
    /* The reader's line for its wishes: the smallest sampling interval the reader asks the
     * writers to use (0: none), to bound the data rate of a whole machine. Written by the
     * reader, read by the writers (relaxed); the buffer itself does not use it. */
    uint64_t requested_interval __attribute__((aligned(64)));
    /* More of the reader's notes to the writers, laid out by their users (the profiler's
     * stack hints, stack_hints.h): written by the reader, read by the writers; the buffer
     * itself does not use them. Zero at creation. */
    uint8_t reader_notes[HS_RB_READER_NOTES_SIZE] __attribute__((aligned(64)));
};

#define HS_RB_LOCK_HELD 1u
#define HS_RB_LOCK_POISONED 2u

/* One process's handle on a shared buffer (writer side, reader side, or both in tests).
 * Private memory: nothing here is shared, so the reader's fields cannot be tampered with. */
struct hs_rb {
    struct hs_rb_meta *meta; /* the metadata page */
    uint8_t *data;           /* the data area, mapped twice: data[0 .. 2 * size) */
    uint64_t size;           /* S, from our own ftruncate or fstat */
    void *map_base;
    size_t map_len;
    int fd; /* the memfd if we created it (closed by hs_rb_destroy), else -1 */
    uint64_t lock_timeout_ns;
    /* Reader state. */
    uint64_t read_pos;       /* authoritative: the shared copy is only published */
    uint64_t write_pos_seen; /* the last write_pos loaded (checked at each use) */
    uint64_t peeked_span;    /* bytes hs_rb_consume will skip; 0 when nothing is peeked */
    uint64_t stall_timeout_ns;
    uint64_t pending_pos; /* position of the unpublished record being waited on */
    uint64_t pending_since_ns;
    bool pending_seen;
    enum hs_rb_status broken; /* sticky: HS_RB_CORRUPT or HS_RB_STALLED once given up */
};

/* A reserved record: write len bytes at data, then hs_rb_publish. */
struct hs_rb_reservation {
    void *data;
    size_t len;
    uint64_t *header;
};

/* A record seen by the reader. data points into shared memory that the peer may still
 * modify: copy out before validating the contents. Valid until hs_rb_consume. */
struct hs_rb_record {
    const void *data;
    size_t len;
};

/* Counters and flags as found in the metadata page (on the daemon side, the client's claims:
 * use them for reporting only). */
struct hs_rb_stats {
    uint64_t read_pos, write_pos;
    uint64_t overflows;
    uint64_t spinlock_waits;
    uint64_t failed_spinlocks;
    enum hs_rb_status error;
    bool shutdown;
    bool poisoned;
    bool reader_paused;
};

/* Client side: creates a sealed memfd (cannot shrink or grow) of one metadata page plus
 * data_size bytes and maps it. data_size must be a power of two multiple of the page size,
 * at most HS_RB_MAX_SIZE. rb->fd is the descriptor to send to the daemon. Returns 0 or a
 * negative errno (-EINVAL for a bad size). Allocates nothing with malloc. */
int hs_rb_create(struct hs_rb *rb, size_t data_size);

/* Daemon side: maps a buffer received from a client. The size comes from fstat and must be
 * one page plus a valid data size; the memfd must carry F_SEAL_SHRINK, so that the client
 * cannot truncate it under the daemon's feet (SIGBUS). Does not take ownership of fd (the
 * caller may close it right after). Returns 0 or a negative errno (-EBADF, -EINVAL for a
 * bad size or a non-memfd, -EPERM for a missing seal, mmap's errors). */
int hs_rb_attach(struct hs_rb *rb, int fd);

/* Unmaps, closes the fd if hs_rb_create made it, and clears *rb. Safe on a zeroed struct. */
void hs_rb_destroy(struct hs_rb *rb);

/* ---- Writer side. Async-signal-safe, allocation-free, usable in a forked child. ---- */

/* Reserves room for a len-byte record. HS_RB_OK with *res filled in, or HS_RB_FULL,
 * HS_RB_TOO_BIG, HS_RB_LOCK_TIMEOUT, HS_RB_POISONED, HS_RB_SHUTDOWN, HS_RB_CORRUPT (the
 * positions are impossible: the buffer is then poisoned). A reservation must be published
 * promptly: the reader cannot get past it, and gives up after its stall timeout. */
enum hs_rb_status hs_rb_reserve(struct hs_rb *rb, size_t len, struct hs_rb_reservation *res);

/* Publishes a reserved record. Returns true when the reader is asleep and this caller must
 * wake it (exactly one writer gets true per pause of the reader). */
bool hs_rb_publish(struct hs_rb *rb, const struct hs_rb_reservation *res);

/* reserve + copy + publish. *wake_reader as for hs_rb_publish (false on failure). */
enum hs_rb_status hs_rb_write(struct hs_rb *rb, const void *buf, size_t len, bool *wake_reader);

/* hs_rb_write retried every ~100 us while the buffer is full, for up to timeout_ns (the
 * block_client mode). Every failed attempt counts as an overflow. */
enum hs_rb_status hs_rb_write_retry(struct hs_rb *rb, const void *buf, size_t len,
                                    uint64_t timeout_ns, bool *wake_reader);

/* How long a writer spins for the lock before HS_RB_LOCK_TIMEOUT (this handle only). */
void hs_rb_set_lock_timeout(struct hs_rb *rb, uint64_t ns);

/* ---- Reader side. One reader thread per buffer. ---- */

/* Looks at the next record. HS_RB_OK with *rec filled in; HS_RB_EMPTY; HS_RB_PENDING (the
 * next record is reserved, not yet published: try again later); or, once the reader has
 * given up, HS_RB_CORRUPT or HS_RB_STALLED for good (the buffer is then poisoned and its
 * error set, so the writers stop). Never reads outside the mapping and never blocks. */
enum hs_rb_status hs_rb_peek(struct hs_rb *rb, struct hs_rb_record *rec);

/* Moves past the record returned by the last successful hs_rb_peek, handing its space back
 * to the writers. No-op when nothing is peeked. */
void hs_rb_consume(struct hs_rb *rb);

/* How long hs_rb_peek may see the same unpublished record before it gives up. 0: on the
 * second look. The daemon can also give up at once when it knows the client is gone. */
void hs_rb_set_stall_timeout(struct hs_rb *rb, uint64_t ns);

/* Before sleeping: marks the reader paused. Returns true when the reader may sleep until a
 * writer wakes it (nothing published at the head); false when there is something to look at
 * right now (the flag is then cleared again). A writer publishing after this call sees the
 * flag. Sleep with a timeout anyway: a writer can die before it wakes the reader. */
bool hs_rb_reader_pause(struct hs_rb *rb);

/* After waking up for another reason than a writer's wake-up: clears the flag. */
void hs_rb_reader_resume(struct hs_rb *rb);

/* ---- Both sides. ---- */

/* Gives up on the buffer: records why (first error wins) and poisons the lock. */
void hs_rb_poison(struct hs_rb *rb, enum hs_rb_status why);

/* Sets the shutdown flag: every later write fails with HS_RB_SHUTDOWN. */
void hs_rb_set_shutdown(struct hs_rb *rb);

/* The error code in the metadata page (HS_RB_OK when none). */
enum hs_rb_status hs_rb_error(const struct hs_rb *rb);

void hs_rb_get_stats(const struct hs_rb *rb, struct hs_rb_stats *st);

/* Bytes written and not yet handed back by the reader, as a writer sees them now (a hint
 * for adaptive sampling: racy, clamped to the data size). */
uint64_t hs_rb_used(const struct hs_rb *rb);

/* Writer: where the next reservation starts (every record reserved so far lies below it). */
uint64_t hs_rb_write_pos(const struct hs_rb *rb);

/* Writer: true when the reader has consumed everything below pos (a position from
 * hs_rb_write_pos). The reader's word: a reader that lies can only shorten a wait. */
bool hs_rb_read_reached(const struct hs_rb *rb, uint64_t pos);

/* "ok", "empty", "pending", "buffer full", ... ("unknown" for a value out of range). */
const char *hs_rb_status_text(enum hs_rb_status st);

#endif
