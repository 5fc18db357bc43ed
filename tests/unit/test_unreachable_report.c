/* test_unreachable_report.c: the text report (src/memunreachable/report_text.c), exact to the
 * character (and hs_backtrace_format against hs_backtrace_log), and the result codec
 * (result_codec.c): round trips (also larger than a pipe's buffer), failed results, and truncated,
 * garbled and hostile streams.
 */
#define _GNU_SOURCE
#include "backtrace.h"
#include "check.h"
#include "log.h"
#include "report_text.h"
#include "result_codec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- Text ---------------------------------------------------------------------------- */

static char g_text[65536];
static size_t g_text_len;

static void append(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    if (g_text_len + len + 2 > sizeof(g_text))
        return;
    memcpy(g_text + g_text_len, line, len);
    g_text_len += len;
    g_text[g_text_len++] = '\n';
    g_text[g_text_len] = '\0';
}

static const char *render(const struct UnreachableMemoryInfo *info, bool contents)
{
    g_text_len = 0;
    g_text[0] = '\0';
    hs_mu_report_text(info, contents, append, NULL);
    return g_text;
}

static struct UnreachableLeak make_leak(uintptr_t begin, size_t size)
{
    struct UnreachableLeak l;
    memset(&l, 0, sizeof(l));
    l.begin = begin;
    l.size = size;
    l.total_size = size;
    l.contents_length = size < 32 ? size : 32;
    for (size_t i = 0; i < l.contents_length; i++)
        l.contents[i] = (uint8_t)('a' + i);
    return l;
}

static void test_text(void)
{
    check_context("summary only, plural");
    struct UnreachableMemoryInfo info;
    memset(&info, 0, sizeof(info));
    CHECK_STREQ(render(&info, true), "  0 bytes in 0 unreachable allocations\n"
                                     "  ABI: 'x86_64'\n"
                                     "\n");

    check_context("one leak, singular forms, short contents with a partial line");
    struct UnreachableLeak l[3];
    l[0] = make_leak(0x7f0012345670, 20);
    l[0].contents[3] = 0x00;
    l[0].contents[4] = 0x7f;
    l[0].contents[5] = 0x1f;
    l[0].contents[6] = 0xff;
    l[0].contents[7] = ' ';
    l[0].contents[8] = '~';
    l[0].referenced_count = 1;
    l[0].referenced_size = 8;
    l[0].similar_count = 1;
    l[0].similar_size = 20;
    l[0].similar_referenced_count = 1;
    l[0].similar_referenced_size = 16;
    info.leaks = l;
    info.num_reported_leaks = 1;
    info.num_leaks = 1;
    info.leak_bytes = 20;
    CHECK_STREQ(
        render(&info, true),
        "  20 bytes in 1 unreachable allocation\n"
        "  ABI: 'x86_64'\n"
        "\n"
        "  20 bytes unreachable at 7f0012345670\n"
        "   referencing 8 unreachable bytes in 1 allocation\n"
        "   and 20 similar unreachable bytes in 1 allocation\n"
        "   referencing 16 unreachable bytes in 1 allocation\n"
        "   contents:\n"
        "   7f0012345670: 61 62 63 00 7f 1f ff 20 7e 6a 6b 6c 6d 6e 6f 70 abc.... ~jklmnop\n"
        "   7f0012345680: 71 72 73 74                                     qrst\n"
        "\n");

    check_context("without contents; plural counts; no similar referencing line");
    l[0].referenced_count = 2;
    l[0].referenced_size = 16;
    l[0].similar_count = 3;
    l[0].similar_size = 60;
    l[0].similar_referenced_count = 0;
    l[0].similar_referenced_size = 0;
    info.num_leaks = 4;
    info.leak_bytes = 96;
    CHECK_STREQ(render(&info, false), "  96 bytes in 4 unreachable allocations\n"
                                      "  ABI: 'x86_64'\n"
                                      "\n"
                                      "  20 bytes unreachable at 7f0012345670\n"
                                      "   referencing 16 unreachable bytes in 2 allocations\n"
                                      "   and 60 similar unreachable bytes in 3 allocations\n"
                                      "\n");

    check_context("large leak: first 32 bytes, exactly two lines; 16 bytes: one line; backtrace");
    l[0] = make_leak(0x1000, 4096);
    l[1] = make_leak(0x2000, 16);
    l[1].num_backtrace_frames = 2;
    l[1].backtrace_frames[0] = 0x10;
    l[1].backtrace_frames[1] = 0x20;
    l[2] = make_leak(0x3000, 1);
    info.leaks = l;
    info.num_reported_leaks = 3;
    info.num_leaks = 3;
    info.leak_bytes = 4113;
    CHECK_STREQ(render(&info, true),
                "  4113 bytes in 3 unreachable allocations\n"
                "  ABI: 'x86_64'\n"
                "\n"
                "  4096 bytes unreachable at 1000\n"
                "   first 32 bytes of contents:\n"
                "   1000: 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 abcdefghijklmnop\n"
                "   1010: 71 72 73 74 75 76 77 78 79 7a 7b 7c 7d 7e 7f 80 qrstuvwxyz{|}~..\n"
                "\n"
                "  16 bytes unreachable at 2000\n"
                "   contents:\n"
                "   2000: 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 abcdefghijklmnop\n"
                "          #00  pc 0000000000000010  <unknown>\n"
                "          #01  pc 0000000000000020  <unknown>\n"
                "\n"
                "  1 bytes unreachable at 3000\n"
                "   contents:\n"
                "   3000: 61                                              a\n"
                "\n");

    check_context("log summary line");
    char line[256];
    struct UnreachableMemoryInfo s;
    memset(&s, 0, sizeof(s));
    s.num_leaks = 1;
    s.leak_bytes = 24;
    s.num_allocations = 1;
    s.allocation_bytes = 24;
    size_t n = hs_mu_summary_line(&s, line, sizeof(line));
    CHECK_STREQ(line, "24 bytes in 1 allocation unreachable out of 24 bytes in 1 allocation");
    CHECK_EQ(n, strlen(line));
    s.num_leaks = 0;
    s.leak_bytes = 0;
    s.num_allocations = 1234;
    s.allocation_bytes = 567890;
    hs_mu_summary_line(&s, line, sizeof(line));
    CHECK_STREQ(line,
                "0 bytes in 0 allocations unreachable out of 567890 bytes in 1234 allocations");
    CHECK_STREQ(hs_mu_abi_name(), "x86_64");
}

/* hs_backtrace_format gives exactly the lines hs_backtrace_log logs. */
static char g_logged[16][1024];
static size_t g_nlogged;

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    const char *m = memmem(line, len, "] test: ", 8);
    if (!m || g_nlogged >= 16)
        return;
    m += 8;
    size_t n = (size_t)(line + len - m);
    while (n > 0 && m[n - 1] == '\n')
        n--;
    memcpy(g_logged[g_nlogged], m, n);
    g_logged[g_nlogged++][n] = '\0';
}

static void test_backtrace_lines(void)
{
    check_context("hs_backtrace_format and hs_backtrace_log give the same lines");
    uintptr_t frames[8];
    size_t n = hs_backtrace_capture(frames, 8, 0);
    CHECK(n >= 2);
    frames[n - 1] = 0x10; /* and an unknown one */
    hs_log_init("test");
    g_nlogged = 0;
    hs_log_set_sink(log_sink, NULL);
    hs_backtrace_log(frames, n);
    hs_backtrace_log(frames, 0);
    hs_log_set_sink(NULL, NULL);
    g_text_len = 0;
    g_text[0] = '\0';
    hs_backtrace_format(frames, n, append, NULL);
    hs_backtrace_format(frames, 0, append, NULL);
    char logged[16 * 1024];
    size_t len = 0;
    for (size_t i = 0; i < g_nlogged; i++)
        len += (size_t)snprintf(logged + len, sizeof(logged) - len, "%s\n", g_logged[i]);
    CHECK_EQ(g_nlogged, n + 1);
    CHECK_STREQ(g_text, logged);
    CHECK(strstr(g_text, "test_backtrace_lines") != NULL);
    CHECK(strstr(g_text, "  Backtrace failed to get any frames.\n") != NULL);
}

/* ---- Codec --------------------------------------------------------------------------- */

static struct UnreachableLeak g_leaks[2000];

static void fill_leaks(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        g_leaks[i] = make_leak(0x100000 + i * 64, 48);
        g_leaks[i].referenced_count = i % 3;
        g_leaks[i].referenced_size = (i % 3) * 16;
        g_leaks[i].total_size = 48 + (i % 3) * 16;
        g_leaks[i].num_backtrace_frames = i % 17;
        for (size_t k = 0; k < i % 17; k++)
            g_leaks[i].backtrace_frames[k] = 0x400000 + k;
    }
}

static const struct hs_mu_result_summary g_summary = {
    .num_leaks = 5000,
    .leak_bytes = 500000,
    .num_allocations = 9000,
    .allocation_bytes = 900000,
    .skipped_pages = 3,
};

/* Writes n records from a child process (so that more than a pipe's buffer can go through)
 * and reads them here. */
static int round_trip(size_t n, size_t limit, struct UnreachableMemoryInfo *info, size_t *skipped)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        _exit(hs_mu_result_write(fds[1], 0, &g_summary, g_leaks, n) == 0 ? 0 : 1);
    }
    close(fds[1]);
    int r = hs_mu_result_read_limited(fds[0], info, limit, 10000, skipped);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return r;
}

static void test_codec_round_trip(void)
{
    check_context("round trip, 2000 records (more than a pipe buffer)");
    fill_leaks(2000);
    struct UnreachableMemoryInfo info;
    size_t skipped = 0;
    CHECK_EQ(round_trip(2000, 2000, &info, &skipped), 0);
    CHECK_EQ(info.num_reported_leaks, 2000);
    CHECK_EQ(info.num_leaks, 5000);
    CHECK_EQ(info.leak_bytes, 500000);
    CHECK_EQ(info.num_allocations, 9000);
    CHECK_EQ(info.allocation_bytes, 900000);
    CHECK_EQ(skipped, 3);
    CHECK(info.leaks && memcmp(info.leaks, g_leaks, 2000 * sizeof(g_leaks[0])) == 0);
    free(info.leaks);

    check_context("round trip, no records; the 3-argument reader");
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    CHECK_EQ(hs_mu_result_write(fds[1], 0, &g_summary, NULL, 0), 0);
    close(fds[1]);
    CHECK_EQ(hs_mu_result_read(fds[0], &info, 1000), 0);
    CHECK_EQ(info.num_reported_leaks, 0);
    CHECK(info.leaks == NULL);
    CHECK_EQ(info.num_leaks, 5000);
    close(fds[0]);

    check_context("more records than the limit");
    CHECK_EQ(round_trip(10, 9, &info, NULL), -EPROTO);
    CHECK(info.leaks == NULL);
    CHECK_EQ(info.num_leaks, 0);

    check_context("a failed sweep");
    CHECK_EQ(pipe(fds), 0);
    CHECK_EQ(hs_mu_result_write(fds[1], -ENOTSUP, NULL, NULL, 0), 0);
    close(fds[1]);
    CHECK_EQ(hs_mu_result_read(fds[0], &info, 1000), -ENOTSUP);
    close(fds[0]);

    check_context("the reader went away: EPIPE, not SIGPIPE");
    CHECK_EQ(pipe(fds), 0);
    close(fds[0]);
    signal(SIGPIPE, SIG_IGN);
    CHECK_EQ(hs_mu_result_write(fds[1], 0, &g_summary, g_leaks, 10), -EPIPE);
    signal(SIGPIPE, SIG_DFL);
    close(fds[1]);
}

/* Feeds raw bytes to the reader. */
static int read_bytes(const void *data, size_t len, size_t limit, bool close_writer, int timeout)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fds[1], (const char *)data + done, len - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (close_writer)
        close(fds[1]);
    struct UnreachableMemoryInfo info;
    int r = hs_mu_result_read_limited(fds[0], &info, limit, timeout, NULL);
    if (r == 0)
        free(info.leaks);
    else
        CHECK(info.leaks == NULL && info.num_reported_leaks == 0);
    close(fds[0]);
    if (!close_writer)
        close(fds[1]);
    return r;
}

static uint8_t g_buf[1 << 20];

/* A valid stream of n records in g_buf; returns its length. */
static size_t encode(size_t n)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    CHECK_EQ(hs_mu_result_write(fds[1], 0, &g_summary, g_leaks, n), 0);
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], g_buf + len, sizeof(g_buf) - len)) > 0)
        len += (size_t)r;
    close(fds[0]);
    return len;
}

static void fix_checksum(size_t len)
{
    /* Recompute the trailer's FNV-1a so that only the tampered field is wrong. */
    size_t body = len - sizeof(struct hs_mu_result_trailer);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < body; i++) {
        h ^= g_buf[i];
        h *= 0x100000001b3ull;
    }
    struct hs_mu_result_trailer *t = (struct hs_mu_result_trailer *)(g_buf + body);
    t->checksum = h;
}

static void test_codec_garbled(void)
{
    fill_leaks(20);
    size_t len = encode(20);
    struct hs_mu_result_header *h = (struct hs_mu_result_header *)g_buf;
    struct UnreachableLeak *recs = (struct UnreachableLeak *)(g_buf + sizeof(*h));
    CHECK_EQ(len, sizeof(*h) + 20 * sizeof(struct UnreachableLeak) +
                      sizeof(struct hs_mu_result_trailer));
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), 0);

    check_context("truncated anywhere: EPIPE");
    size_t cuts[] = {0,
                     1,
                     sizeof(*h) - 1,
                     sizeof(*h),
                     sizeof(*h) + 7,
                     sizeof(*h) + 20 * sizeof(struct UnreachableLeak),
                     len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
        CHECK_EQ(read_bytes(g_buf, cuts[i], 100, true, 1000), -EPIPE);

    check_context("nothing arrives: timeout");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(read_bytes(g_buf, 10, 100, false, 200), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(ms >= 150 && ms < 2000);

    check_context("bad magic, version, record size");
    h->magic ^= 1;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->magic ^= 1;
    h->version = 2;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->version = HS_MU_RESULT_VERSION;
    h->record_size = 8;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->record_size = sizeof(struct UnreachableLeak);

    check_context("hostile counts: no huge allocation, a clear error");
    h->num_records = UINT64_MAX / 2;
    h->num_leaks = UINT64_MAX / 2;
    h->num_allocations = UINT64_MAX / 2;
    h->leak_bytes = UINT64_MAX / 2;
    h->allocation_bytes = UINT64_MAX / 2;
    fix_checksum(len);
    CHECK_EQ(read_bytes(g_buf, len, SIZE_MAX, true, 1000), -EPIPE); /* runs out of data */
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);     /* over the limit */
    h->num_records = 20;
    h->num_leaks = 5; /* fewer than records */
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->num_leaks = 5000;
    h->num_allocations = 10; /* fewer allocations than leaks */
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->num_allocations = 9000;
    h->leak_bytes = 500000;
    h->allocation_bytes = 900000;
    h->error = 7; /* positive error */
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->error = -100000;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    h->error = 0;
    fix_checksum(len);
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), 0);

    check_context("garbled records");
    struct UnreachableLeak saved = recs[5];
    recs[5].contents_length = 33;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[5] = saved;
    recs[5].num_backtrace_frames = 17;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[5] = saved;
    recs[5].total_size++;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[5] = saved;
    recs[5].size = 0;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[5] = saved;
    recs[5].referenced_count = SIZE_MAX;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[5] = saved;

    check_context("flipped byte: checksum");
    recs[7].contents[3] ^= 0x40;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    recs[7].contents[3] ^= 0x40;
    struct hs_mu_result_trailer *t =
        (struct hs_mu_result_trailer *)(g_buf + len - sizeof(struct hs_mu_result_trailer));
    t->magic ^= 0x100;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), -EPROTO);
    t->magic ^= 0x100;
    CHECK_EQ(read_bytes(g_buf, len, 100, true, 1000), 0);

    check_context("random garbage never crashes");
    struct hs_mu_result_header valid = *h;
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + (size_t)(x % 2000);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            g_buf[i] = (uint8_t)x;
        }
        if (round % 2) { /* a valid header prefix with garbage after it */
            memcpy(g_buf, &valid, n < sizeof(valid) ? n : sizeof(valid));
        }
        CHECK(read_bytes(g_buf, n, SIZE_MAX, true, 1000) != 0);
    }
}

int main(void)
{
    test_text();
    test_backtrace_lines();
    test_codec_round_trip();
    test_codec_garbled();
    return check_report();
}
