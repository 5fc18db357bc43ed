/* test_ring_buffer.c: unit tests of the profiler's shared ring buffer
 * (src/profiler/ring_buffer.c).
 *
 * Sizes and attach checks; records of every size from 0 to the maximum, their alignment;
 * records across the end of the data area (contiguous through the second view); a full
 * buffer (refused, counted, nothing damaged) and the block_client retry; the reader's
 * pause/wake-up protocol; a reserved record never published (the reader waits, then gives
 * up with HS_RB_STALLED); a lock holder that died and a writer in a signal handler (bounded
 * spin, never a deadlock); shutdown; 4 writer threads against one reader thread (1M records
 * with sequence numbers and checksums: no loss that is not counted, no duplicate, no torn
 * record, no lost wake-up); writers in forked children; and a reader facing garbage
 * (random bytes and each impossible position or header), which must report an error and
 * never crash or loop.
 *
 * CHECK is not thread-safe: threads collect results, the main thread checks them.
 *
 * `test_ring_buffer --write-seeds DIR` writes the seed corpus of fuzz/fuzz_ring_buffer.c
 * (valid buffers of a 4096-byte data area, metadata page + data) into DIR.
 */
#define _GNU_SOURCE
#include "check.h"
#include "ring_buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE HS_RB_PAGE_SIZE

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The byte at index i of a record with the given seed. */
static uint8_t pattern(uint64_t seed, size_t i)
{
    uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
    return (uint8_t)(x >> 56);
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(seed, i);
}

static bool matches(const uint8_t *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(seed, i))
            return false;
    return true;
}

static enum hs_rb_status write_pattern(struct hs_rb *rb, size_t len, uint64_t seed)
{
    static uint8_t buf[1 << 16];
    fill(buf, len, seed);
    bool wake;
    return hs_rb_write(rb, buf, len, &wake);
}

/* Peeks one record and checks its length and contents; consumes it. */
static bool read_pattern_at(struct hs_rb *rb, size_t len, uint64_t seed, const char *file, int line)
{
    struct hs_rb_record rec;
    enum hs_rb_status st = hs_rb_peek(rb, &rec);
    if (!check_eq_at(st, HS_RB_OK, file, line, "hs_rb_peek", "HS_RB_OK"))
        return false;
    bool ok = check_eq_at(rec.len, len, file, line, "rec.len", "len") &&
              check_at(matches(rec.data, len, seed), file, line, "record contents");
    hs_rb_consume(rb);
    return ok;
}
#define READ_PATTERN(rb, len, seed) read_pattern_at((rb), (len), (seed), __FILE__, __LINE__)

/* ---- Sizes, attach ---- */

static void test_create_sizes(void)
{
    check_context("create sizes");
    struct hs_rb rb;
    size_t bad[] = {0, 8, PAGE - 1, PAGE + 8, 3 * PAGE, 12 * PAGE, 512u << 20, 1u << 30};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ(hs_rb_create(&rb, bad[i]), -EINVAL);
        CHECK_EQ(rb.fd, -1);
        hs_rb_destroy(&rb); /* harmless on a failed create */
    }
    size_t good[] = {PAGE, 2 * PAGE, HS_RB_DEFAULT_SIZE, 256u << 20};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        CHECK_EQ(hs_rb_create(&rb, good[i]), 0);
        CHECK_EQ(rb.size, good[i]);
        CHECK(rb.fd >= 0);
        CHECK_EQ((uintptr_t)rb.data % PAGE, 0);
        /* Both views of the data area are the same memory. */
        rb.data[5] = 42;
        CHECK_EQ(rb.data[rb.size + 5], 42);
        rb.data[2 * rb.size - 1] = 7;
        CHECK_EQ(rb.data[rb.size - 1], 7);
        hs_rb_destroy(&rb);
        CHECK(rb.map_base == NULL);
    }
}

static int memfd_sized(size_t bytes, unsigned seals)
{
    int fd = memfd_create("test_ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        return -1;
    if (seals && fcntl(fd, F_ADD_SEALS, seals) != 0)
        return -1;
    return fd;
}

static void test_attach_bad(void)
{
    check_context("attach: bad fd and sizes");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_attach(&rb, -1), -EBADF);
    CHECK_EQ(hs_rb_attach(&rb, 1000), -EBADF); /* not open */

    int p[2];
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(hs_rb_attach(&rb, p[0]), -EINVAL);
    close(p[0]);
    close(p[1]);

    /* A regular file of the right size: cannot be sealed, so the client could shrink it. */
    char path[] = "/tmp/hs_ring_test.XXXXXX";
    int tf = mkstemp(path);
    CHECK(tf >= 0);
    unlink(path);
    CHECK_EQ(ftruncate(tf, PAGE + PAGE), 0);
    CHECK_EQ(hs_rb_attach(&rb, tf), -EINVAL);
    close(tf);

    /* A memfd of the right size without the shrink seal. */
    int fd = memfd_sized(PAGE + PAGE, 0);
    CHECK_EQ(hs_rb_attach(&rb, fd), -EPERM);
    close(fd);
    fd = memfd_sized(PAGE + PAGE, F_SEAL_GROW);
    CHECK_EQ(hs_rb_attach(&rb, fd), -EPERM);
    close(fd);

    /* Sealed memfds of impossible sizes. */
    size_t sizes[] = {
        0, 8, PAGE, PAGE + 8, PAGE + 3 * PAGE, 2 * PAGE + PAGE / 2, PAGE + (512u << 20)};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        fd = memfd_sized(sizes[i], F_SEAL_SHRINK);
        CHECK(fd >= 0);
        CHECK_EQ(hs_rb_attach(&rb, fd), -EINVAL);
        CHECK(rb.map_base == NULL);
        close(fd);
    }

    /* The right size and seal: attaches; the caller keeps the fd. */
    fd = memfd_sized(PAGE + 4 * PAGE, F_SEAL_SHRINK);
    CHECK_EQ(hs_rb_attach(&rb, fd), 0);
    CHECK_EQ(rb.size, 4 * PAGE);
    CHECK_EQ(rb.fd, -1);
    hs_rb_destroy(&rb);
    CHECK(fcntl(fd, F_GETFD) >= 0);
    close(fd);

    /* A buffer from hs_rb_create attaches, and both handles see the same records. */
    struct hs_rb w;
    CHECK_EQ(hs_rb_create(&w, 2 * PAGE), 0);
    CHECK_EQ(hs_rb_attach(&rb, w.fd), 0);
    CHECK_EQ(rb.size, 2 * PAGE);
    CHECK_EQ(write_pattern(&w, 100, 1), HS_RB_OK);
    READ_PATTERN(&rb, 100, 1);
    struct hs_rb_stats st;
    hs_rb_get_stats(&w, &st);
    CHECK_EQ(st.read_pos, 112);
    CHECK_EQ(st.write_pos, 112);
    hs_rb_destroy(&rb);
    hs_rb_destroy(&w);
}

/* ---- Single-threaded behaviour ---- */

static void test_basic(void)
{
    check_context("basic write, peek, consume");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_EMPTY);
    hs_rb_consume(&rb); /* nothing peeked: no-op */
    CHECK_EQ(rb.read_pos, 0);

    CHECK_EQ(write_pattern(&rb, 10, 10), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 0, 11), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 33, 12), HS_RB_OK);
    /* Peeking twice shows the same record. */
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    const void *first = rec.data;
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    CHECK(rec.data == first);
    READ_PATTERN(&rb, 10, 10);
    READ_PATTERN(&rb, 0, 11);
    READ_PATTERN(&rb, 33, 12);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_EMPTY);
    CHECK_EQ(rb.read_pos, 24 + 8 + 48);

    /* Reserve and publish directly. */
    struct hs_rb_reservation res;
    CHECK_EQ(hs_rb_reserve(&rb, 5, &res), HS_RB_OK);
    CHECK_EQ(res.len, 5);
    memcpy(res.data, "hello", 5);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    CHECK(!hs_rb_publish(&rb, &res));
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    CHECK(rec.len == 5 && memcmp(rec.data, "hello", 5) == 0);
    hs_rb_consume(&rb);

    for (int s = HS_RB_OK; s <= HS_RB_STALLED; s++)
        CHECK(strcmp(hs_rb_status_text((enum hs_rb_status)s), "unknown") != 0);
    CHECK_STREQ(hs_rb_status_text((enum hs_rb_status)99), "unknown");
    CHECK_EQ(hs_rb_error(&rb), HS_RB_OK);
    hs_rb_destroy(&rb);
}

static void test_every_size(void)
{
    check_context("every record size, alignment");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    size_t max = PAGE - HS_RB_HEADER_SIZE;
    int bad = 0;
    for (size_t len = 0; len <= max; len++) {
        if (write_pattern(&rb, len, len) != HS_RB_OK) {
            bad++;
            continue;
        }
        struct hs_rb_record rec;
        if (hs_rb_peek(&rb, &rec) != HS_RB_OK || rec.len != len || !matches(rec.data, len, len) ||
            (uintptr_t)rec.data % 8 != 0 || rb.read_pos % 8 != 0)
            bad++;
        hs_rb_consume(&rb);
        struct hs_rb_stats st;
        hs_rb_get_stats(&rb, &st);
        if (st.write_pos % 8 != 0 || st.write_pos != st.read_pos)
            bad++;
    }
    CHECK_EQ(bad, 0);
    bool wake;
    CHECK_EQ(hs_rb_write(&rb, "", max + 1, &wake), HS_RB_TOO_BIG);
    CHECK_EQ(hs_rb_write(&rb, "", (size_t)-1, &wake), HS_RB_TOO_BIG);
    struct hs_rb_reservation res;
    CHECK_EQ(hs_rb_reserve(&rb, max + 1, &res), HS_RB_TOO_BIG);

    /* Fill with records of one size, then drain: every size that packs several per lap. */
    bad = 0;
    for (size_t len = 0; len <= 600; len += 7) {
        size_t n = 0;
        while (write_pattern(&rb, len, len * 1000 + n) == HS_RB_OK)
            n++;
        size_t span = (len + 8 + 7) & ~(size_t)7;
        if (n != PAGE / span)
            bad++;
        for (size_t i = 0; i < n; i++) {
            struct hs_rb_record rec;
            if (hs_rb_peek(&rb, &rec) != HS_RB_OK || rec.len != len ||
                !matches(rec.data, len, len * 1000 + i))
                bad++;
            hs_rb_consume(&rb);
        }
        struct hs_rb_record rec;
        if (hs_rb_peek(&rb, &rec) != HS_RB_EMPTY)
            bad++;
    }
    CHECK_EQ(bad, 0);
    hs_rb_destroy(&rb);
}

static void test_wraparound(void)
{
    check_context("wrap-around");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    /* Move the positions to 24 bytes before the end of the data area. */
    CHECK_EQ(write_pattern(&rb, PAGE - 24 - 8, 1), HS_RB_OK);
    READ_PATTERN(&rb, PAGE - 24 - 8, 1);
    CHECK_EQ(rb.read_pos, PAGE - 24);

    CHECK_EQ(write_pattern(&rb, 100, 2), HS_RB_OK);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    const uint8_t *p = rec.data;
    /* The payload starts in the first view and runs into the second, contiguously ... */
    CHECK(p == rb.data + PAGE - 16);
    CHECK(p + rec.len > rb.data + PAGE);
    CHECK(matches(p, 100, 2));
    /* ... which is the start of the data area. */
    CHECK(matches(rb.data, 84, 2 + 16));
    hs_rb_consume(&rb);
    CHECK_EQ(rb.read_pos, PAGE - 24 + 112);

    /* Many laps with sizes that straddle the end at every offset. */
    int bad = 0;
    for (int i = 0; i < 5000; i++) {
        size_t len = (size_t)(rnd() % 1500);
        if (write_pattern(&rb, len, (uint64_t)i) != HS_RB_OK)
            bad++;
        if (hs_rb_peek(&rb, &rec) != HS_RB_OK || rec.len != len ||
            !matches(rec.data, len, (uint64_t)i))
            bad++;
        hs_rb_consume(&rb);
    }
    CHECK_EQ(bad, 0);
    CHECK(rb.read_pos > 100 * PAGE);
    hs_rb_destroy(&rb);
}

struct drain_later {
    struct hs_rb *rb;
    unsigned delay_ms;
};

static void *drain_one_later(void *arg)
{
    struct drain_later *d = arg;
    sleep_ms(d->delay_ms);
    struct hs_rb_record rec;
    if (hs_rb_peek(d->rb, &rec) == HS_RB_OK)
        hs_rb_consume(d->rb);
    return NULL;
}

static void test_full(void)
{
    check_context("full buffer");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    /* 64-byte payloads: 72-byte records, 56 fit in 4096 bytes. */
    size_t n = 0;
    while (write_pattern(&rb, 64, n) == HS_RB_OK)
        n++;
    CHECK_EQ(n, PAGE / 72);
    struct hs_rb_stats st;
    hs_rb_get_stats(&rb, &st);
    CHECK_EQ(st.overflows, 1);
    CHECK_EQ(st.write_pos, n * 72);
    /* Still refused: each attempt counts. A record that fits the 64 bytes left is taken. */
    CHECK_EQ(write_pattern(&rb, 64, 999), HS_RB_FULL);
    CHECK_EQ(write_pattern(&rb, 56, 1000), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 0, 999), HS_RB_FULL);
    hs_rb_get_stats(&rb, &st);
    CHECK_EQ(st.overflows, 3);
    CHECK_EQ(st.write_pos, PAGE);
    /* Nothing damaged. */
    for (size_t i = 0; i < n; i++)
        READ_PATTERN(&rb, 64, i);
    READ_PATTERN(&rb, 56, 1000);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_EMPTY);

    /* The largest record fills the buffer exactly. */
    CHECK_EQ(write_pattern(&rb, PAGE - 8, 5), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 0, 6), HS_RB_FULL);

    /* block_client: retries for the timeout, then fails; each attempt is an overflow. */
    hs_rb_get_stats(&rb, &st);
    uint64_t before = st.overflows;
    uint8_t small[16] = {0};
    bool wake;
    uint64_t t0 = now_ns();
    CHECK_EQ(hs_rb_write_retry(&rb, small, sizeof(small), 2000000, &wake), HS_RB_FULL);
    uint64_t took = now_ns() - t0;
    CHECK(took >= 2000000 && took < 1000000000);
    hs_rb_get_stats(&rb, &st);
    CHECK(st.overflows >= before + 2);

    /* ... and succeeds once the reader makes room. */
    struct drain_later d = {&rb, 20};
    pthread_t th;
    pthread_create(&th, NULL, drain_one_later, &d);
    CHECK_EQ(hs_rb_write_retry(&rb, small, sizeof(small), 5000000000ull, &wake), HS_RB_OK);
    pthread_join(th, NULL);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    CHECK_EQ(rec.len, sizeof(small));
    hs_rb_consume(&rb);
    hs_rb_destroy(&rb);
}

static void test_wakeup_protocol(void)
{
    check_context("reader pause and wake-up");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    struct hs_rb_stats st;
    bool wake;
    uint8_t b[8] = {0};

    /* Not paused: no wake-up. */
    CHECK_EQ(hs_rb_write(&rb, b, 8, &wake), HS_RB_OK);
    CHECK(!wake);
    /* Something to read: the reader must not sleep. */
    CHECK(!hs_rb_reader_pause(&rb));
    hs_rb_get_stats(&rb, &st);
    CHECK(!st.reader_paused);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    hs_rb_consume(&rb);

    /* Empty: may sleep; the next publisher (only it) wakes the reader. */
    CHECK(hs_rb_reader_pause(&rb));
    hs_rb_get_stats(&rb, &st);
    CHECK(st.reader_paused);
    CHECK_EQ(hs_rb_write(&rb, b, 8, &wake), HS_RB_OK);
    CHECK(wake);
    CHECK_EQ(hs_rb_write(&rb, b, 8, &wake), HS_RB_OK);
    CHECK(!wake);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
        hs_rb_consume(&rb);
    }

    /* Pending head: may sleep; its publisher wakes the reader. */
    struct hs_rb_reservation res;
    CHECK_EQ(hs_rb_reserve(&rb, 8, &res), HS_RB_OK);
    CHECK(hs_rb_reader_pause(&rb));
    CHECK(hs_rb_publish(&rb, &res));
    CHECK(!hs_rb_reader_pause(&rb));
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    hs_rb_consume(&rb);

    /* Woken by something else: resume clears the flag. */
    CHECK(hs_rb_reader_pause(&rb));
    hs_rb_reader_resume(&rb);
    CHECK_EQ(hs_rb_write(&rb, b, 8, &wake), HS_RB_OK);
    CHECK(!wake);
    hs_rb_destroy(&rb);
}

static void test_unpublished(void)
{
    check_context("reserved record never published");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    hs_rb_set_stall_timeout(&rb, 200000000); /* 200 ms */
    struct hs_rb_record rec;
    struct hs_rb_reservation late, dead;

    /* A late writer: the reader waits at its record, records behind it wait too. */
    CHECK_EQ(write_pattern(&rb, 20, 1), HS_RB_OK);
    CHECK_EQ(hs_rb_reserve(&rb, 30, &late), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 40, 3), HS_RB_OK);
    READ_PATTERN(&rb, 20, 1);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    hs_rb_consume(&rb); /* nothing peeked: does not skip the pending record */
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    sleep_ms(10);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING); /* within the timeout */
    fill(late.data, 30, 2);
    hs_rb_publish(&rb, &late);
    READ_PATTERN(&rb, 30, 2);
    READ_PATTERN(&rb, 40, 3);

    /* The stall clock restarts for each new pending record. */
    CHECK_EQ(hs_rb_reserve(&rb, 30, &late), HS_RB_OK);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    sleep_ms(30);
    fill(late.data, 30, 4);
    hs_rb_publish(&rb, &late);
    READ_PATTERN(&rb, 30, 4);
    CHECK_EQ(hs_rb_reserve(&rb, 30, &late), HS_RB_OK);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    sleep_ms(30);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    hs_rb_publish(&rb, &late);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_OK);
    hs_rb_consume(&rb);

    /* A dead writer: after the timeout the reader gives up, for good, and tells everyone. */
    CHECK_EQ(hs_rb_reserve(&rb, 30, &dead), HS_RB_OK);
    CHECK_EQ(write_pattern(&rb, 40, 5), HS_RB_OK);
    uint64_t t0 = now_ns();
    enum hs_rb_status st;
    int looks = 0;
    while ((st = hs_rb_peek(&rb, &rec)) == HS_RB_PENDING && looks < 1000) {
        looks++;
        sleep_ms(1);
    }
    uint64_t waited = now_ns() - t0;
    CHECK_EQ(st, HS_RB_STALLED);
    CHECK(waited >= 200000000 && waited < 5000000000ull);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_STALLED); /* sticky */
    CHECK_EQ(hs_rb_error(&rb), HS_RB_STALLED);
    struct hs_rb_stats s;
    hs_rb_get_stats(&rb, &s);
    CHECK(s.poisoned);
    CHECK_EQ(write_pattern(&rb, 8, 6), HS_RB_POISONED);
    CHECK(!hs_rb_reader_pause(&rb)); /* the caller must look and see the error */
    /* Publishing late changes nothing. */
    hs_rb_publish(&rb, &dead);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_STALLED);
    CHECK(strstr(hs_rb_status_text(HS_RB_STALLED), "never published") != NULL);
    hs_rb_destroy(&rb);

    /* Stall timeout 0: gives up on the second look. */
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    hs_rb_set_stall_timeout(&rb, 0);
    CHECK_EQ(hs_rb_reserve(&rb, 30, &dead), HS_RB_OK);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_PENDING);
    CHECK_EQ(hs_rb_peek(&rb, &rec), HS_RB_STALLED);
    hs_rb_destroy(&rb);
}

static void test_dead_lock_holder(void)
{
    check_context("lock holder died");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    CHECK_EQ(write_pattern(&rb, 50, 1), HS_RB_OK);
    hs_rb_set_lock_timeout(&rb, 20000000); /* 20 ms */
    /* A writer died between taking and dropping the lock. */
    __atomic_store_n(&rb.meta->lock, HS_RB_LOCK_HELD, __ATOMIC_RELAXED);
    uint64_t t0 = now_ns();
    CHECK_EQ(write_pattern(&rb, 50, 2), HS_RB_LOCK_TIMEOUT);
    uint64_t took = now_ns() - t0;
    CHECK(took >= 20000000 && took < 1000000000);
    struct hs_rb_stats st;
    hs_rb_get_stats(&rb, &st);
    CHECK_EQ(st.failed_spinlocks, 1);
    CHECK_EQ(st.spinlock_waits, 1);
    /* The reader never takes the lock. */
    READ_PATTERN(&rb, 50, 1);
    /* Poisoned while held: writers fail at once, and dropping the lock keeps the poison. */
    hs_rb_poison(&rb, HS_RB_CORRUPT);
    t0 = now_ns();
    CHECK_EQ(write_pattern(&rb, 50, 3), HS_RB_POISONED);
    CHECK(now_ns() - t0 < 10000000);
    CHECK_EQ(hs_rb_error(&rb), HS_RB_CORRUPT);
    hs_rb_poison(&rb, HS_RB_STALLED); /* the first reason stays */
    CHECK_EQ(hs_rb_error(&rb), HS_RB_CORRUPT);
    hs_rb_destroy(&rb);
}

/* A signal handler that writes, interrupting a thread that writes and reads. */
static struct hs_rb g_sig_rb;
static volatile sig_atomic_t g_sig_ok, g_sig_timeout, g_sig_full, g_sig_other;

static void sig_writer(int sig)
{
    (void)sig;
    int saved = errno;
    uint8_t buf[24];
    memset(buf, 0xAB, sizeof(buf));
    bool wake;
    enum hs_rb_status st = hs_rb_write(&g_sig_rb, buf, sizeof(buf), &wake);
    if (st == HS_RB_OK)
        g_sig_ok++;
    else if (st == HS_RB_LOCK_TIMEOUT)
        g_sig_timeout++;
    else if (st == HS_RB_FULL)
        g_sig_full++;
    else
        g_sig_other++;
    errno = saved;
}

static void test_signal_handler(void)
{
    check_context("writer in a signal handler");
    CHECK_EQ(hs_rb_create(&g_sig_rb, PAGE), 0);
    hs_rb_set_lock_timeout(&g_sig_rb, 1000000); /* 1 ms */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = sig_writer;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);

    /* The interrupted thread holds the lock: the handler gives up instead of deadlocking. */
    __atomic_store_n(&g_sig_rb.meta->lock, HS_RB_LOCK_HELD, __ATOMIC_RELAXED);
    raise(SIGUSR1);
    CHECK_EQ(g_sig_timeout, 1);
    __atomic_store_n(&g_sig_rb.meta->lock, 0, __ATOMIC_RELAXED);
    raise(SIGUSR1);
    CHECK_EQ(g_sig_ok, 1);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&g_sig_rb, &rec), HS_RB_OK);
    CHECK_EQ(rec.len, 24);
    hs_rb_consume(&g_sig_rb);

    /* A timer interrupts the writing thread anywhere, for 300 ms. The handler's lock wait
     * must stay well below the timer's period, or the handler would run back to back and the
     * interrupted holder would never get to drop the lock. */
    hs_rb_set_lock_timeout(&g_sig_rb, 100000); /* 100 us */
    g_sig_ok = g_sig_timeout = g_sig_full = g_sig_other = 0;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    uint64_t end = now_ns() + 300000000;
    unsigned main_ok = 0, main_other = 0, got_main = 0, got_sig = 0, bad = 0;
    while (now_ns() < end) {
        enum hs_rb_status st = write_pattern(&g_sig_rb, 40, main_ok);
        if (st == HS_RB_OK)
            main_ok++;
        else if (st != HS_RB_FULL && st != HS_RB_LOCK_TIMEOUT)
            main_other++;
        if (main_ok % 16 == 0 || st == HS_RB_FULL) {
            while (hs_rb_peek(&g_sig_rb, &rec) == HS_RB_OK) {
                if (rec.len == 24)
                    got_sig++;
                else if (rec.len == 40 && matches(rec.data, 40, got_main))
                    got_main++;
                else
                    bad++;
                hs_rb_consume(&g_sig_rb);
            }
        }
    }
    memset(&it, 0, sizeof(it));
    setitimer(ITIMER_REAL, &it, NULL);
    while (hs_rb_peek(&g_sig_rb, &rec) == HS_RB_OK) {
        if (rec.len == 24)
            got_sig++;
        else if (rec.len == 40 && matches(rec.data, 40, got_main))
            got_main++;
        else
            bad++;
        hs_rb_consume(&g_sig_rb);
    }
    CHECK_EQ(hs_rb_peek(&g_sig_rb, &rec), HS_RB_EMPTY);
    CHECK_EQ(bad, 0);
    CHECK_EQ(main_other, 0);
    CHECK_EQ(g_sig_other, 0);
    CHECK_EQ(got_main, main_ok);
    CHECK_EQ(got_sig, (unsigned)g_sig_ok);
    CHECK(g_sig_ok > 0);
    struct hs_rb_stats st;
    hs_rb_get_stats(&g_sig_rb, &st);
    CHECK_EQ(st.failed_spinlocks, (uint64_t)g_sig_timeout + 1);
    printf("signal handler: %u writes, %d from the handler, %d handler lock timeouts\n", main_ok,
           (int)g_sig_ok, (int)g_sig_timeout);
    signal(SIGALRM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    hs_rb_destroy(&g_sig_rb);
}

static void test_shutdown(void)
{
    check_context("shutdown");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, PAGE), 0);
    CHECK_EQ(write_pattern(&rb, 9, 9), HS_RB_OK);
    hs_rb_set_shutdown(&rb);
    CHECK_EQ(write_pattern(&rb, 9, 10), HS_RB_SHUTDOWN);
    struct hs_rb_stats st;
    hs_rb_get_stats(&rb, &st);
    CHECK(st.shutdown);
    CHECK_EQ(st.overflows, 0);
    READ_PATTERN(&rb, 9, 9);
    hs_rb_destroy(&rb);
}

/* ---- Concurrency: 4 writer threads, 1 reader thread ---- */

#define WRITERS 4
#define PER_WRITER 250000

struct rec_head {
    uint32_t writer;
    uint32_t seq;
    uint64_t checksum; /* of writer, seq and the payload that follows */
};

static uint64_t rec_checksum(uint32_t writer, uint32_t seq, const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)writer << 32 | seq);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static size_t payload_len(uint32_t writer, uint32_t seq)
{
    return (size_t)((seq * 2654435761u + writer * 97u) % 300u);
}

struct conc {
    struct hs_rb rb;
    int wake_pipe[2];
    int writers_done;
    /* Per writer, written by that writer. */
    uint64_t full[WRITERS], lock_timeouts[WRITERS], dropped[WRITERS], wakes[WRITERS];
    /* Reader's results. */
    uint64_t received[WRITERS];
    uint64_t bad_checksum, bad_order, bad_len, lost_wakeups, sleeps, reader_errors;
};

struct writer_arg {
    struct conc *c;
    uint32_t id;
};

static void *conc_writer(void *arg)
{
    struct writer_arg *wa = arg;
    struct conc *c = wa->c;
    uint32_t id = wa->id;
    uint8_t buf[sizeof(struct rec_head) + 300];
    for (uint32_t seq = 0; seq < PER_WRITER; seq++) {
        size_t n = payload_len(id, seq);
        uint8_t *payload = buf + sizeof(struct rec_head);
        for (size_t i = 0; i < n; i++)
            payload[i] = (uint8_t)(seq + i * 31 + id);
        struct rec_head h = {id, seq, rec_checksum(id, seq, payload, n)};
        memcpy(buf, &h, sizeof(h));
        size_t len = sizeof(h) + n;
        for (;;) {
            enum hs_rb_status st;
            bool wake = false;
            if (id == 3) {
                /* Writer 3 goes through reserve/publish. */
                struct hs_rb_reservation res;
                st = hs_rb_reserve(&c->rb, len, &res);
                if (st == HS_RB_OK) {
                    memcpy(res.data, buf, len);
                    wake = hs_rb_publish(&c->rb, &res);
                }
            } else {
                st = hs_rb_write(&c->rb, buf, len, &wake);
            }
            if (wake) {
                c->wakes[id]++;
                char b = 1;
                if (write(c->wake_pipe[1], &b, 1) != 1 && errno != EAGAIN)
                    abort();
            }
            if (st == HS_RB_OK)
                break;
            if (st == HS_RB_FULL)
                c->full[id]++;
            else if (st == HS_RB_LOCK_TIMEOUT)
                c->lock_timeouts[id]++;
            else
                abort();
            /* Writers 0 and 1 retry (block_client); 2 and 3 drop the record. */
            if (id >= 2) {
                c->dropped[id]++;
                break;
            }
            sched_yield();
        }
    }
    return NULL;
}

static void conc_check(struct conc *c, const struct hs_rb_record *rec, int64_t *last_seq)
{
    struct rec_head h;
    if (rec->len < sizeof(h)) {
        c->bad_len++;
        return;
    }
    memcpy(&h, rec->data, sizeof(h));
    if (h.writer >= WRITERS || rec->len != sizeof(h) + payload_len(h.writer, h.seq)) {
        c->bad_len++;
        return;
    }
    const uint8_t *payload = (const uint8_t *)rec->data + sizeof(h);
    if (rec_checksum(h.writer, h.seq, payload, rec->len - sizeof(h)) != h.checksum)
        c->bad_checksum++;
    /* Each writer's records arrive in order: a repeat or a step back is a duplicate. */
    if ((int64_t)h.seq <= last_seq[h.writer])
        c->bad_order++;
    last_seq[h.writer] = h.seq;
    c->received[h.writer]++;
}

static void *conc_reader(void *arg)
{
    struct conc *c = arg;
    int64_t last_seq[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        last_seq[i] = -1;
    struct hs_rb_record rec;
    for (;;) {
        enum hs_rb_status st = hs_rb_peek(&c->rb, &rec);
        if (st == HS_RB_OK) {
            conc_check(c, &rec, last_seq);
            hs_rb_consume(&c->rb);
            continue;
        }
        if (st != HS_RB_EMPTY && st != HS_RB_PENDING) {
            c->reader_errors++;
            return NULL;
        }
        if (st == HS_RB_EMPTY && __atomic_load_n(&c->writers_done, __ATOMIC_ACQUIRE))
            return NULL;
        if (!hs_rb_reader_pause(&c->rb))
            continue;
        c->sleeps++;
        struct pollfd pfd = {c->wake_pipe[0], POLLIN, 0};
        int n = poll(&pfd, 1, 2000);
        if (n == 0) {
            /* Nobody woke us for 2 s: if a record is waiting, its wake-up was lost. */
            hs_rb_reader_resume(&c->rb);
            if (hs_rb_peek(&c->rb, &rec) == HS_RB_OK)
                c->lost_wakeups++;
            continue;
        }
        char drain[64];
        if (read(c->wake_pipe[0], drain, sizeof(drain)) < 0)
            abort();
    }
}

static void test_concurrent(void)
{
    check_context("4 writers, 1 reader");
    static struct conc c;
    memset(&c, 0, sizeof(c));
    CHECK_EQ(hs_rb_create(&c.rb, 64 << 10), 0);
    CHECK_EQ(pipe2(c.wake_pipe, O_NONBLOCK | O_CLOEXEC), 0);
    uint64_t t0 = now_ns();
    pthread_t reader, writers[WRITERS];
    struct writer_arg args[WRITERS];
    pthread_create(&reader, NULL, conc_reader, &c);
    for (uint32_t i = 0; i < WRITERS; i++) {
        args[i] = (struct writer_arg){&c, i};
        pthread_create(&writers[i], NULL, conc_writer, &args[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(writers[i], NULL);
    __atomic_store_n(&c.writers_done, 1, __ATOMIC_RELEASE);
    char b = 0;
    CHECK_EQ(write(c.wake_pipe[1], &b, 1), 1);
    pthread_join(reader, NULL);
    double secs = (double)(now_ns() - t0) / 1e9;

    uint64_t full = 0, timeouts = 0, received = 0, dropped = 0, wakes = 0;
    for (int i = 0; i < WRITERS; i++) {
        full += c.full[i];
        timeouts += c.lock_timeouts[i];
        received += c.received[i];
        dropped += c.dropped[i];
        wakes += c.wakes[i];
        CHECK_EQ(c.received[i] + c.dropped[i], PER_WRITER);
    }
    CHECK_EQ(c.received[0], PER_WRITER);
    CHECK_EQ(c.received[1], PER_WRITER);
    CHECK_EQ(c.bad_len, 0);
    CHECK_EQ(c.bad_checksum, 0);
    CHECK_EQ(c.bad_order, 0);
    CHECK_EQ(c.reader_errors, 0);
    CHECK_EQ(c.lost_wakeups, 0);
    struct hs_rb_stats st;
    hs_rb_get_stats(&c.rb, &st);
    CHECK_EQ(st.overflows, full);
    CHECK_EQ(st.failed_spinlocks, timeouts);
    CHECK_EQ(st.read_pos, st.write_pos);
    CHECK_EQ(st.error, HS_RB_OK);
    CHECK(!st.poisoned);
    printf("concurrent: %llu records received, %llu dropped, %llu overflows, %llu lock waits, "
           "%llu lock timeouts, %llu sleeps, %llu wake-ups, %.2f s\n",
           (unsigned long long)received, (unsigned long long)dropped,
           (unsigned long long)st.overflows, (unsigned long long)st.spinlock_waits,
           (unsigned long long)timeouts, (unsigned long long)c.sleeps, (unsigned long long)wakes,
           secs);
    close(c.wake_pipe[0]);
    close(c.wake_pipe[1]);
    hs_rb_destroy(&c.rb);
}

/* ---- Forked children ---- */

#define FORK_RECORDS 20000

/* Writes FORK_RECORDS records tagged `tag`; retries while full. Returns 0 on success. */
static int write_tagged(struct hs_rb *rb, uint32_t tag)
{
    for (uint32_t seq = 0; seq < FORK_RECORDS; seq++) {
        uint32_t r[4] = {tag, seq, tag ^ seq, ~seq};
        bool wake;
        enum hs_rb_status st;
        while ((st = hs_rb_write(rb, r, sizeof(r), &wake)) == HS_RB_FULL ||
               st == HS_RB_LOCK_TIMEOUT)
            sched_yield();
        if (st != HS_RB_OK)
            return 1;
    }
    return 0;
}

static void test_fork(void)
{
    check_context("writers in forked children");
    struct hs_rb rb;
    CHECK_EQ(hs_rb_create(&rb, 16 << 10), 0);
    fflush(stdout);
    /* Child 1 writes through the mapping it inherited; child 2 maps the memfd afresh. */
    pid_t c1 = fork();
    if (c1 == 0)
        _exit(write_tagged(&rb, 1));
    pid_t c2 = fork();
    if (c2 == 0) {
        struct hs_rb own;
        if (hs_rb_attach(&own, rb.fd) != 0)
            _exit(2);
        _exit(write_tagged(&own, 2));
    }
    /* The parent writes too, and reads everything. */
    uint32_t next[3] = {0, 0, 0};
    unsigned bad = 0, parent_sent = 0;
    bool children_done = false;
    int status1 = -1, status2 = -1;
    uint64_t deadline = now_ns() + 60000000000ull;
    while (now_ns() < deadline) {
        if (parent_sent < FORK_RECORDS) {
            uint32_t r[4] = {0, parent_sent, parent_sent, ~parent_sent};
            bool wake;
            if (hs_rb_write(&rb, r, sizeof(r), &wake) == HS_RB_OK)
                parent_sent++;
        }
        struct hs_rb_record rec;
        enum hs_rb_status st;
        while ((st = hs_rb_peek(&rb, &rec)) == HS_RB_OK) {
            uint32_t r[4];
            if (rec.len != sizeof(r)) {
                bad++;
            } else {
                memcpy(r, rec.data, sizeof(r));
                if (r[0] > 2 || r[1] != next[r[0]] || r[2] != (r[0] ^ r[1]) || r[3] != ~r[1])
                    bad++;
                else
                    next[r[0]]++;
            }
            hs_rb_consume(&rb);
        }
        if (st != HS_RB_EMPTY && st != HS_RB_PENDING) {
            bad++;
            break;
        }
        if (!children_done) {
            if (status1 < 0 && waitpid(c1, &status1, WNOHANG) != c1)
                status1 = -1;
            if (status2 < 0 && waitpid(c2, &status2, WNOHANG) != c2)
                status2 = -1;
            children_done = status1 >= 0 && status2 >= 0;
        }
        if (children_done && parent_sent == FORK_RECORDS && st == HS_RB_EMPTY)
            break;
    }
    CHECK(children_done);
    CHECK(WIFEXITED(status1) && WEXITSTATUS(status1) == 0);
    CHECK(WIFEXITED(status2) && WEXITSTATUS(status2) == 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(next[0], FORK_RECORDS);
    CHECK_EQ(next[1], FORK_RECORDS);
    CHECK_EQ(next[2], FORK_RECORDS);
    hs_rb_destroy(&rb);
}

/* ---- Garbage in the shared area ---- */

/* Reads until a non-OK status; returns it. Fails the test on a loop or a record outside the
 * mapping. */
static enum hs_rb_status drain_hostile(struct hs_rb *rb, unsigned *records, bool *escaped)
{
    struct hs_rb_record rec;
    *records = 0;
    *escaped = false;
    /* A record takes at least 8 bytes of at most S: S/8 records, then one pending look. */
    for (uint64_t i = 0; i < rb->size / 8 + 4; i++) {
        enum hs_rb_status st = hs_rb_peek(rb, &rec);
        if (st == HS_RB_PENDING)
            continue;
        if (st != HS_RB_OK)
            return st;
        const uint8_t *p = rec.data;
        if (p < rb->data || p > rb->data + 2 * rb->size || rec.len > rb->size ||
            p + rec.len > rb->data + 2 * rb->size)
            *escaped = true;
        volatile uint8_t sink = 0;
        for (size_t k = 0; k < rec.len; k += 512)
            sink ^= p[k];
        if (rec.len)
            sink ^= p[rec.len - 1];
        (void)sink;
        (*records)++;
        hs_rb_consume(rb);
    }
    return HS_RB_OK; /* looped: a failure */
}

/* Sets the shared positions and the header at the read position, attaches a fresh reader
 * and returns its first status. */
static enum hs_rb_status peek_with(struct hs_rb *w, uint64_t read_pos, uint64_t write_pos,
                                   uint64_t header, size_t *len)
{
    memset(w->meta, 0, sizeof(*w->meta));
    w->meta->read_pos = read_pos;
    w->meta->write_pos = write_pos;
    memset(w->data, 0, w->size);
    memcpy(w->data + (read_pos & (w->size - 1) & ~(uint64_t)7), &header, 8);
    struct hs_rb r;
    if (hs_rb_attach(&r, w->fd) != 0)
        return (enum hs_rb_status) - 1;
    hs_rb_set_stall_timeout(&r, 0);
    struct hs_rb_record rec;
    enum hs_rb_status st = hs_rb_peek(&r, &rec);
    if (st == HS_RB_PENDING)
        st = hs_rb_peek(&r, &rec);
    *len = st == HS_RB_OK ? rec.len : 0;
    if (st == HS_RB_CORRUPT && hs_rb_error(&r) != HS_RB_CORRUPT)
        st = (enum hs_rb_status) - 2;
    hs_rb_destroy(&r);
    return st;
}

static void test_garbage(void)
{
    check_context("hostile metadata and headers");
    struct hs_rb w;
    CHECK_EQ(hs_rb_create(&w, PAGE), 0);
    size_t len = 0;
    const uint64_t S = PAGE;
    const uint64_t top = UINT64_MAX - 7; /* the last aligned position */

    CHECK_EQ(peek_with(&w, 0, 0, 0, &len), HS_RB_EMPTY);
    CHECK_EQ(peek_with(&w, 64, 64, 12345, &len), HS_RB_EMPTY);
    CHECK_EQ(peek_with(&w, 0, 16, 16, &len), HS_RB_OK);
    CHECK_EQ(len, 8);
    CHECK_EQ(peek_with(&w, 0, 16, 0, &len), HS_RB_STALLED);
    /* Positions: write behind read, more than S ahead, misaligned. */
    CHECK_EQ(peek_with(&w, 64, 56, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 64, 0, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, S + 8, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, S, S, &len), HS_RB_OK);
    CHECK_EQ(len, S - 8);
    CHECK_EQ(peek_with(&w, 0, 12, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 4, 20, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 3, 3 + 16, 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, UINT64_MAX, 8, &len), HS_RB_CORRUPT);
    /* Headers: too small, misaligned length past the data, past the written data, huge. */
    for (uint64_t h = 1; h < 8; h++)
        CHECK_EQ(peek_with(&w, 0, 64, h, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, 64, &len), HS_RB_OK);
    CHECK_EQ(peek_with(&w, 0, 64, 63, &len), HS_RB_OK);
    CHECK_EQ(len, 55);
    CHECK_EQ(peek_with(&w, 0, 64, 65, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, 72, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, S + 8, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, UINT64_MAX, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, UINT64_MAX - 6, &len), HS_RB_CORRUPT);
    CHECK_EQ(peek_with(&w, 0, 64, 1ull << 63, &len), HS_RB_CORRUPT);
    /* Positions wrap around 2^64 like any other multiple of S. */
    CHECK_EQ(peek_with(&w, top, 8, 16, &len), HS_RB_OK);
    CHECK_EQ(peek_with(&w, top, top + 8, 8, &len), HS_RB_OK);
    CHECK_EQ(peek_with(&w, top, 24, 40, &len), HS_RB_CORRUPT);

    /* After an error: sticky, error recorded, lock poisoned, writers stop. */
    memset(w.meta, 0, sizeof(*w.meta));
    CHECK_EQ(write_pattern(&w, 10, 1), HS_RB_OK);
    uint64_t bogus = 3;
    memcpy(w.data, &bogus, 8);
    struct hs_rb_record rec;
    CHECK_EQ(hs_rb_peek(&w, &rec), HS_RB_CORRUPT);
    memcpy(w.data, &(uint64_t){18}, 8); /* repaired: too late */
    CHECK_EQ(hs_rb_peek(&w, &rec), HS_RB_CORRUPT);
    CHECK_EQ(hs_rb_error(&w), HS_RB_CORRUPT);
    CHECK_EQ(write_pattern(&w, 10, 2), HS_RB_POISONED);
    hs_rb_destroy(&w);

    /* The writer checks the positions too. */
    CHECK_EQ(hs_rb_create(&w, PAGE), 0);
    w.meta->write_pos = S + 64;
    CHECK_EQ(write_pattern(&w, 10, 1), HS_RB_CORRUPT);
    CHECK_EQ(hs_rb_error(&w), HS_RB_CORRUPT);
    CHECK_EQ(write_pattern(&w, 10, 1), HS_RB_POISONED);
    hs_rb_destroy(&w);
    CHECK_EQ(hs_rb_create(&w, PAGE), 0);
    w.meta->read_pos = 4;
    w.meta->write_pos = 4;
    CHECK_EQ(write_pattern(&w, 10, 1), HS_RB_CORRUPT);
    hs_rb_destroy(&w);
}

static void test_random_garbage(void)
{
    check_context("random bytes in the shared area");
    struct hs_rb w;
    CHECK_EQ(hs_rb_create(&w, PAGE), 0);
    unsigned loops = 0, escaped = 0, corrupt = 0, ok_end = 0, total_records = 0;
    for (int iter = 0; iter < 3000; iter++) {
        /* Random metadata and data; some iterations keep the positions plausible, some
         * plant plausible headers, so that the reader gets past the first record. */
        uint64_t *m = (uint64_t *)w.meta;
        for (size_t i = 0; i < sizeof(*w.meta) / 8; i++)
            m[i] = rnd();
        uint64_t *d = (uint64_t *)w.data;
        for (size_t i = 0; i < PAGE / 8; i++)
            d[i] = rnd();
        int mode = iter % 4;
        if (mode >= 1) {
            uint64_t r = rnd() & ~(uint64_t)7;
            w.meta->read_pos = r;
            w.meta->write_pos = r + (rnd() % (PAGE + 16) & ~(uint64_t)7);
        }
        if (mode >= 2) {
            /* A chain of small headers from the read position, some of them broken. */
            uint64_t p = w.meta->read_pos;
            for (int k = 0; k < 200; k++) {
                uint64_t h = 8 + rnd() % (mode == 3 ? 40 : 200);
                if (rnd() % 64 == 0)
                    h = rnd() % 16;
                memcpy(w.data + (p & (PAGE - 1)), &h, 8);
                p += (h + 7) & ~(uint64_t)7;
            }
        }
        struct hs_rb r;
        if (hs_rb_attach(&r, w.fd) != 0) {
            CHECK(false);
            break;
        }
        hs_rb_set_stall_timeout(&r, 0);
        unsigned records;
        bool esc;
        enum hs_rb_status st = drain_hostile(&r, &records, &esc);
        total_records += records;
        if (st == HS_RB_OK)
            loops++;
        if (esc)
            escaped++;
        if (st == HS_RB_CORRUPT || st == HS_RB_STALLED)
            corrupt++;
        else if (st == HS_RB_EMPTY)
            ok_end++;
        hs_rb_destroy(&r);
    }
    CHECK_EQ(loops, 0);
    CHECK_EQ(escaped, 0);
    CHECK(corrupt > 1500);
    CHECK(total_records > 1000);
    printf("random garbage: %u errors, %u clean ends, %u records read\n", corrupt, ok_end,
           total_records);
    hs_rb_destroy(&w);
}

/* ---- Seeds for the fuzzer ---- */

static int save(struct hs_rb *rb, const char *dir, const char *name)
{
    static uint8_t buf[PAGE + PAGE];
    if (pread(rb->fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
        return 1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    size_t n = fwrite(buf, 1, sizeof(buf), f);
    return fclose(f) != 0 || n != sizeof(buf);
}

static int write_seeds(const char *dir)
{
    struct hs_rb rb;
    int err = 0;
    struct hs_rb_record rec;
    struct hs_rb_reservation res;

    /* Empty. */
    if (hs_rb_create(&rb, PAGE) != 0)
        return 1;
    err |= save(&rb, dir, "empty");
    /* A few small records of assorted sizes. */
    for (size_t i = 0; i < 12; i++)
        write_pattern(&rb, i * 13, i);
    err |= save(&rb, dir, "small_records");
    hs_rb_destroy(&rb);

    /* Records across the end of the data area, some already read. */
    if (hs_rb_create(&rb, PAGE) != 0)
        return 1;
    write_pattern(&rb, PAGE - 200, 0);
    hs_rb_peek(&rb, &rec);
    hs_rb_consume(&rb);
    for (size_t i = 0; i < 8; i++)
        write_pattern(&rb, 40 + i * 9, i);
    hs_rb_peek(&rb, &rec);
    hs_rb_consume(&rb);
    err |= save(&rb, dir, "wrapped");
    /* Then one reserved, unpublished record at the end. */
    hs_rb_reserve(&rb, 30, &res);
    err |= save(&rb, dir, "unpublished");
    hs_rb_destroy(&rb);

    /* Full. */
    if (hs_rb_create(&rb, PAGE) != 0)
        return 1;
    for (size_t i = 0; write_pattern(&rb, 100, i) == HS_RB_OK; i++)
        ;
    err |= save(&rb, dir, "full");
    hs_rb_destroy(&rb);

    /* Many empty records. */
    if (hs_rb_create(&rb, PAGE) != 0)
        return 1;
    for (size_t i = 0; i < 64; i++)
        write_pattern(&rb, 0, i);
    err |= save(&rb, dir, "zero_length");
    hs_rb_destroy(&rb);
    return err;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2]);
    test_create_sizes();
    test_attach_bad();
    test_basic();
    test_every_size();
    test_wraparound();
    test_full();
    test_wakeup_protocol();
    test_unpublished();
    test_dead_lock_holder();
    test_signal_handler();
    test_shutdown();
    test_garbage();
    test_random_garbage();
    test_fork();
    test_concurrent();
    return check_report();
}
