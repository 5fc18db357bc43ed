/* result_codec.c: see result_codec.h. */
#include "result_codec.h"

#include "hash.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- Writer ------------------------------------------------------------------------------ */

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                return -errno;
            continue;
        }
        return w < 0 ? -errno : -EIO;
    }
    return 0;
}

int hs_mu_result_write(int fd, int error, const struct hs_mu_result_summary *summary,
                       const struct UnreachableLeak *leaks, size_t n)
{
    struct hs_mu_result_header h;
    memset(&h, 0, sizeof(h));
    h.magic = HS_MU_RESULT_MAGIC;
    h.version = HS_MU_RESULT_VERSION;
    h.error = error < 0 ? error : 0;
    h.record_size = sizeof(struct UnreachableLeak);
    if (h.error == 0 && summary) {
        h.num_leaks = summary->num_leaks;
        h.leak_bytes = summary->leak_bytes;
        h.num_allocations = summary->num_allocations;
        h.allocation_bytes = summary->allocation_bytes;
        h.skipped_pages = summary->skipped_pages;
        h.num_records = n;
    } else {
        n = 0;
    }
    struct hs_mu_result_trailer t = {.magic = HS_MU_RESULT_TRAILER_MAGIC};
    t.checksum = hs_hash_bytes_from(HS_HASH_BYTES_SEED, &h, sizeof(h));
    t.checksum = hs_hash_bytes_from(t.checksum, leaks, n * sizeof(*leaks));
    int r = write_all(fd, &h, sizeof(h));
    if (r == 0 && n > 0)
        r = write_all(fd, leaks, n * sizeof(*leaks));
    if (r == 0)
        r = write_all(fd, &t, sizeof(t));
    return r;
}

/* ---- Reader ------------------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads exactly len bytes before the deadline (-1: none). */
static int read_full(int fd, void *buf, size_t len, int64_t deadline)
{
    uint8_t *p = buf;
    while (len > 0) {
        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            wait = left > 1000000000 ? 1000000000 : (int)left;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, wait);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pr == 0)
            continue; /* the deadline check above decides */
        if (pfd.revents & POLLNVAL)
            return -EBADF;
        ssize_t r = read(fd, p, len);
        if (r > 0) {
            p += r;
            len -= (size_t)r;
        } else if (r == 0) {
            return -EPIPE;
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return -errno;
        }
    }
    return 0;
}

static size_t sat_add(size_t a, size_t b)
{
    return a + b < a ? SIZE_MAX : a + b;
}

static bool header_ok(const struct hs_mu_result_header *h)
{
    return h->num_leaks <= h->num_allocations && h->leak_bytes <= h->allocation_bytes &&
           h->num_records <= h->num_leaks && h->leak_bytes >= h->num_leaks &&
           h->num_allocations <= SIZE_MAX && h->allocation_bytes <= SIZE_MAX;
}

static bool record_ok(const struct UnreachableLeak *l, const struct hs_mu_result_header *h)
{
    size_t contents = l->size < UNREACHABLE_CONTENTS_LENGTH ? l->size : UNREACHABLE_CONTENTS_LENGTH;
    size_t total = sat_add(sat_add(l->size, l->referenced_size),
                           sat_add(l->similar_size, l->similar_referenced_size));
    return l->size > 0 && l->size <= h->leak_bytes && l->contents_length == contents &&
           l->num_backtrace_frames <= UNREACHABLE_BACKTRACE_FRAMES && l->total_size == total &&
           l->referenced_count < h->num_leaks && l->similar_count < h->num_leaks &&
           (l->referenced_count > 0 || l->referenced_size == 0) &&
           (l->similar_count > 0 || (l->similar_size == 0 && l->similar_referenced_count == 0)) &&
           (l->similar_referenced_count > 0 || l->similar_referenced_size == 0);
}

static void clear_info(struct UnreachableMemoryInfo *info)
{
    info->leaks = NULL;
    info->num_leaks = 0;
    info->leak_bytes = 0;
    info->num_allocations = 0;
    info->allocation_bytes = 0;
    info->num_reported_leaks = 0;
}

int hs_mu_result_read_limited(int fd, struct UnreachableMemoryInfo *info, size_t limit,
                              int timeout_ms, size_t *skipped_pages)
{
    clear_info(info);
    if (skipped_pages)
        *skipped_pages = 0;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

    struct hs_mu_result_header h;
    int r = read_full(fd, &h, sizeof(h), deadline);
    if (r != 0)
        return r;
    if (h.magic != HS_MU_RESULT_MAGIC || h.version != HS_MU_RESULT_VERSION ||
        h.record_size != sizeof(struct UnreachableLeak))
        return -EPROTO;
    if (h.error != 0)
        return h.error < 0 && h.error > -4096 ? h.error : -EPROTO;
    if (!header_ok(&h) || h.num_records > limit)
        return -EPROTO;
    uint64_t sum = hs_hash_bytes_from(HS_HASH_BYTES_SEED, &h, sizeof(h));

    /* Grow the array with what actually arrives, so that a lying count costs nothing. */
    struct UnreachableLeak *leaks = NULL;
    size_t cap = 0, n = 0;
    while (n < h.num_records) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            if (ncap > h.num_records)
                ncap = (size_t)h.num_records;
            struct UnreachableLeak *nl = realloc(leaks, ncap * sizeof(*nl));
            if (!nl) {
                free(leaks);
                return -ENOMEM;
            }
            leaks = nl;
            cap = ncap;
        }
        size_t chunk = cap - n;
        r = read_full(fd, &leaks[n], chunk * sizeof(*leaks), deadline);
        if (r != 0) {
            free(leaks);
            return r;
        }
        for (size_t i = n; i < n + chunk; i++) {
            if (!record_ok(&leaks[i], &h)) {
                free(leaks);
                return -EPROTO;
            }
        }
        sum = hs_hash_bytes_from(sum, &leaks[n], chunk * sizeof(*leaks));
        n += chunk;
    }

    struct hs_mu_result_trailer t;
    r = read_full(fd, &t, sizeof(t), deadline);
    if (r == 0 && (t.magic != HS_MU_RESULT_TRAILER_MAGIC || t.reserved != 0 || t.checksum != sum))
        r = -EPROTO;
    if (r != 0) {
        free(leaks);
        return r;
    }
    info->leaks = leaks;
    info->num_reported_leaks = n;
    info->num_leaks = (size_t)h.num_leaks;
    info->leak_bytes = (size_t)h.leak_bytes;
    info->num_allocations = (size_t)h.num_allocations;
    info->allocation_bytes = (size_t)h.allocation_bytes;
    if (skipped_pages)
        *skipped_pages = (size_t)h.skipped_pages;
    return 0;
}

int hs_mu_result_read(int fd, struct UnreachableMemoryInfo *info, int timeout_ms)
{
    return hs_mu_result_read_limited(fd, info, SIZE_MAX, timeout_ms, NULL);
}
