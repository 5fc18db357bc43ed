/* test_sampled_set.c: the profiler client's set of sampled addresses
 * (src/profiler/client/sampled_set.c) and the UNIX socket helpers it is sent over
 * (src/common/unix_socket.c). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "check.h"
#include "sampled_set.h"
#include "unix_socket.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_insert_remove(void)
{
    check_context("insert/remove");
    CHECK_EQ(hs_sampled_set_init(), 0);
    hs_sampled_set_reset();
    CHECK(!hs_sampled_maybe(0x1000));
    CHECK(!hs_sampled_remove(0x1000)); /* never inserted: no free to report */
    hs_sampled_insert(0x1000);
    CHECK(hs_sampled_maybe(0x1000));
    CHECK(hs_sampled_remove(0x1000));
    CHECK(!hs_sampled_remove(0x1000)); /* once only */
    CHECK(!hs_sampled_maybe(0x1000));
    /* Addresses sharing both filter counters stay apart in the table. */
    uint64_t a = 0x10000, b = a;
    do
        b += (uint64_t)HS_SAMPLED_ALIGN << HS_SAMPLED_SET_FILTER_BITS; /* same near counter... */
    while (hs_sampled_far_index(b) != hs_sampled_far_index(a)); /* ...and far one */
    hs_sampled_insert(a);
    CHECK(hs_sampled_maybe(b));   /* a "maybe"... */
    CHECK(!hs_sampled_remove(b)); /* ...that the table answers */
    CHECK(hs_sampled_remove(a));
    CHECK(!hs_sampled_maybe(b));
}

static void test_many_live(void)
{
    check_context("100,000 live keys");
    hs_sampled_set_reset();
    for (uint64_t i = 1; i <= 100000; i++)
        hs_sampled_insert(i * 48);
    CHECK_EQ(hs_sampled_overflowed, 0);
    unsigned found = 0, extra = 0;
    for (uint64_t i = 1; i <= 100000; i++)
        found += hs_sampled_remove(i * 48);
    for (uint64_t i = 1; i <= 1000; i++)
        extra += hs_sampled_remove(i * 48 + 8);
    CHECK_EQ(found, 100000);
    CHECK_EQ(extra, 0);
    /* Insert and remove again over the tombstones: still exact. */
    for (int round = 0; round < 5; round++) {
        for (uint64_t i = 1; i <= 50000; i++)
            hs_sampled_insert(i * 64 + (uint64_t)round * 16);
        found = 0;
        for (uint64_t i = 1; i <= 50000; i++)
            found += hs_sampled_remove(i * 64 + (uint64_t)round * 16);
        CHECK_EQ(found, 50000);
    }
    CHECK_EQ(hs_sampled_overflowed, 0);
}

static void test_filter_rate(void)
{
    /* With 6,500 live keys, a free of another address passes the filter about 1% of the time
     * (one counter alone: 10%). */
    check_context("filter rate");
    hs_sampled_set_reset();
    uint64_t seed = 12345;
    for (int i = 0; i < 6500; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        hs_sampled_insert(0x7f0000000000ull + ((seed >> 20) & 0xfffffff0ull));
    }
    unsigned maybe = 0;
    for (uint64_t i = 0; i < 100000; i++)
        maybe += hs_sampled_maybe(0x5500000000ull + i * 48);
    printf("filter: %.2f%% of other addresses pass\n", maybe / 1000.0);
    CHECK(maybe < 3000);
    hs_sampled_set_reset();
}

static void test_overflow_reports_every_free(void)
{
    check_context("overflow");
    hs_sampled_set_reset();
    /* More live keys than the table holds: it overflows, and from then on every free is
     * reported (never a lost one). */
    uint64_t n = 1u << HS_SAMPLED_SET_TABLE_BITS;
    for (uint64_t i = 1; i <= n + 1000; i++)
        hs_sampled_insert(i * 16);
    CHECK_EQ(hs_sampled_overflowed, 1);
    CHECK(hs_sampled_maybe(0x7));
    unsigned reported = 0;
    for (uint64_t i = 1; i <= n + 1000; i++)
        reported += hs_sampled_remove(i * 16);
    CHECK_EQ(reported, n + 1000);
    hs_sampled_set_reset();
    CHECK_EQ(hs_sampled_overflowed, 0);
    CHECK(!hs_sampled_maybe(16));
}

#define THREADS 4
#define PER_THREAD 200000

static void *churn(void *arg)
{
    uintptr_t base = (uintptr_t)arg;
    unsigned *lost = malloc(sizeof(unsigned));
    *lost = 0;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        uint64_t key = base + (uint64_t)(i % 512) * 16;
        hs_sampled_insert(key);
        if (!hs_sampled_remove(key))
            (*lost)++;
    }
    return lost;
}

static void test_threads(void)
{
    check_context("threads");
    hs_sampled_set_reset();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)(0x100000 * (i + 1)));
    unsigned lost = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        lost += *(unsigned *)r;
        free(r);
    }
    CHECK_EQ(lost, 0);
    for (uint64_t i = 0; i < (1u << HS_SAMPLED_SET_FILTER_BITS); i++)
        if (hs_sampled_near[i] != 0 || hs_sampled_far[i] != 0) {
            CHECK_EQ(hs_sampled_near[i] + hs_sampled_far[i], 0); /* every counter back to 0 */
            break;
        }
}

static void test_socket_descriptors(void)
{
    check_context("unix socket");
    int listener = hs_sock_listen("@heapscope-test-sampled-set");
    CHECK(listener >= 0);
    int client = hs_sock_connect("@heapscope-test-sampled-set", 1000);
    CHECK(client >= 0);
    int server = accept(listener, NULL, NULL);
    CHECK(server >= 0);
    int fds[2] = {open("/proc/self/maps", 0), open("/dev/null", 0)};
    CHECK_EQ(hs_sock_send(client, "hello", 5, fds, 2), 0);
    char buf[16];
    int got[4], n = 0;
    CHECK_EQ(hs_sock_recv(server, buf, sizeof(buf), got, 1, &n), 5); /* the 2nd is closed */
    CHECK_EQ(n, 1);
    struct stat a, b;
    CHECK(fstat(got[0], &a) == 0 && fstat(fds[0], &b) == 0 && a.st_ino == b.st_ino);
    close(client);
    CHECK_EQ(hs_sock_recv(server, buf, sizeof(buf), got, 4, &n), 0); /* the peer closed */
    /* Bad addresses. */
    CHECK_EQ(hs_sock_connect("@", 100), -1);
    CHECK_EQ(hs_sock_connect("@no-such-heapscope-socket", 100), -1);
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK_EQ(hs_sock_listen(longname), -1);
    close(server);
    close(listener);
    close(fds[0]);
    close(fds[1]);
    close(got[0]);
}

/* An insert's first access to a page of the table is a write: one page fault per page. A load
 * first would map the shared zero page, and the write after it would fault again and flush the
 * TLBs of every CPU the program runs on (an IPI per page; 845 such faults in a 2-thread
 * malloc_bench run at -i 524288 before). 256 keys land on about 200 of the table's 512 pages:
 * 200 faults, 400 with a load first (261 under ASan, whose shadow pages fault too). */
static void test_insert_faults_once_per_page(void)
{
    check_context("one fault per table page");
    CHECK_EQ(hs_sampled_set_init(), 0);
    hs_sampled_set_reset(); /* the table back to untouched pages */
    uint64_t keys[256];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < 256; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        keys[i] = (x & 0x7fffffffffull) << HS_SAMPLED_ALIGN_SHIFT;
    }
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    for (size_t i = 0; i < 256; i++)
        hs_sampled_insert(keys[i]);
    getrusage(RUSAGE_THREAD, &after);
    long faults = after.ru_minflt - before.ru_minflt;
    CHECK(faults <= 320);
    if (faults > 320)
        fprintf(stderr, "    %ld page faults for 256 inserts\n", faults);
    for (size_t i = 0; i < 256; i++)
        CHECK(hs_sampled_remove(keys[i]));
    check_context(NULL);
}

int main(void)
{
    test_insert_remove();
    test_insert_faults_once_per_page();
    test_many_live();
    test_filter_rate();
    test_overflow_reports_every_free();
    test_threads();
    test_socket_descriptors();
    return check_report();
}
