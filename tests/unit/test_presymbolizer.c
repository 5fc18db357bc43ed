/* test_presymbolizer.c: unit tests of the daemon's background symbolizing
 * (src/profiler/daemon/presymbolizer.c), on this process's own mappings.
 *
 *  - queued pcs are all symbolized by the worker, and give the names of this test's functions
 *    when symbolized again under the lock;
 *  - the symbolizer is used by this thread (lookups and maps declared again, under the lock)
 *    while the worker goes through 20,000 pcs: run under ThreadSanitizer by make sanitize;
 *  - a queue freed while the worker is busy with it returns only once the worker left it, and
 *    another queue is still served;
 *  - the gate's probe (cpu_room.c) reads /proc/stat's idle time of the CPUs it counts, and
 *    counts the thread's own CPU time as room;
 *  - with the gate on and every CPU kept busy, the worker waits with a batch in hand, and
 *    a queue freed meanwhile is let go at once (the gate is turned off for the other tests,
 *    which ctest runs beside others);
 *  - NULL and empty calls are no-ops.
 */
#define _GNU_SOURCE /* cpu_set_t */
#include "check.h"
#include "clock.h"
#include "cpu_room.h"
#include "presymbolizer.h"
#include "symbolizer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__clang__)
#define TEST_NOINLINE __attribute__((noinline))
#else
#define TEST_NOINLINE __attribute__((noinline, noipa))
#endif

TEST_NOINLINE static int presym_leaf(int x)
{
    return x * 3 + 1;
}

TEST_NOINLINE static int presym_middle(int x)
{
    return presym_leaf(x) + 2;
}

TEST_NOINLINE static int presym_outer(int x)
{
    return presym_middle(x) * 5;
}

static struct hs_symbolizer *own_symbolizer(void)
{
    struct hs_symbolizer *s = hs_symbolizer_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 0), 0);
    return s;
}

static const char *name_of(struct hs_presym *ps, struct hs_symbolizer *s, uintptr_t pc)
{
    static struct hs_frame_info frames[HS_SYMBOLIZE_MAX_FRAMES];
    hs_presym_lock(ps);
    size_t n = hs_symbolize(s, pc, 0, frames, HS_SYMBOLIZE_MAX_FRAMES);
    hs_presym_unlock(ps);
    return n > 0 ? frames[n - 1].function : "";
}

static void test_queued_pcs_are_symbolized(void)
{
    check_context("queued pcs are symbolized");
    struct hs_symbolizer *s = own_symbolizer();
    struct hs_presym *ps = hs_presym_new(s);
    CHECK(ps != NULL);
    const uintptr_t pcs[] = {(uintptr_t)presym_leaf + 1, (uintptr_t)presym_middle + 1,
                             (uintptr_t)presym_outer + 1};
    hs_presym_add(ps, pcs, 3);
    hs_presym_add(ps, pcs, 0);
    CHECK(hs_presym_wait(ps, 60000));
    struct hs_presym_stats st;
    hs_presym_get_stats(ps, &st);
    CHECK_EQ(st.queued, 3);
    CHECK_EQ(st.symbolized, 3);
    CHECK_STREQ(name_of(ps, s, pcs[0]), "presym_leaf");
    CHECK_STREQ(name_of(ps, s, pcs[1]), "presym_middle");
    CHECK_STREQ(name_of(ps, s, pcs[2]), "presym_outer");
    CHECK_EQ(presym_outer(1), 30);
    hs_presym_free(ps);
    hs_symbolizer_free(s);
    check_context(NULL);
}

/* pcs spread over this executable's functions and libc's. */
static uintptr_t *spread_pcs(size_t n)
{
    uintptr_t *pcs = malloc(n * sizeof(*pcs));
    CHECK(pcs != NULL);
    const uintptr_t bases[] = {(uintptr_t)presym_leaf, (uintptr_t)presym_outer, (uintptr_t)strlen,
                               (uintptr_t)qsort, (uintptr_t)malloc};
    for (size_t i = 0; i < n; i++)
        pcs[i] = bases[i % 5] + (i / 5) % 64;
    return pcs;
}

static void test_shared_with_this_thread(void)
{
    check_context("symbolizer shared with this thread");
    struct hs_symbolizer *s = own_symbolizer();
    struct hs_presym *ps = hs_presym_new(s);
    CHECK(ps != NULL);
    enum { N = 20000 };
    uintptr_t *pcs = spread_pcs(N);
    hs_presym_add(ps, pcs, N / 2);
    for (int i = 0; i < 200; i++) {
        CHECK_STREQ(name_of(ps, s, (uintptr_t)presym_middle + 1), "presym_middle");
        if (i % 50 == 0) {
            hs_presym_lock(ps);
            CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 0), 0);
            hs_presym_unlock(ps);
        }
        if (i == 100)
            hs_presym_add(ps, pcs + N / 2, N - N / 2);
    }
    CHECK(hs_presym_wait(ps, 120000));
    struct hs_presym_stats st;
    hs_presym_get_stats(ps, &st);
    CHECK_EQ(st.queued, N);
    CHECK_EQ(st.symbolized, N);
    free(pcs);
    hs_presym_free(ps);
    hs_symbolizer_free(s);
    check_context(NULL);
}

static void test_freed_while_busy(void)
{
    check_context("freed while the worker is busy with it");
    struct hs_symbolizer *s1 = own_symbolizer(), *s2 = own_symbolizer();
    struct hs_presym *ps1 = hs_presym_new(s1), *ps2 = hs_presym_new(s2);
    CHECK(ps1 != NULL && ps2 != NULL);
    enum { N = 50000 };
    uintptr_t *pcs = spread_pcs(N);
    hs_presym_add(ps1, pcs, N);
    hs_presym_add(ps2, pcs, 5);
    /* Freed at once: its symbolizer goes right after, so the worker must be out of it. */
    hs_presym_free(ps1);
    hs_symbolizer_free(s1);
    CHECK(hs_presym_wait(ps2, 60000));
    struct hs_presym_stats st;
    hs_presym_get_stats(ps2, &st);
    CHECK_EQ(st.symbolized, 5);
    CHECK_STREQ(name_of(ps2, s2, pcs[0]), "presym_leaf");
    free(pcs);
    hs_presym_free(ps2);
    hs_symbolizer_free(s2);
    check_context(NULL);
}

static void test_cpu_room_parse(void)
{
    check_context("cpu room: /proc/stat parsed");
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(0, &cpus);
    CPU_SET(2, &cpus);
    uint64_t idle = 7;
    const char *stat = "cpu  100 0 50 9000 40 0 1 0 0 0\n"
                       "cpu0 10 0 5 1000 4 0 0 0 0 0\n"
                       "cpu1 10 0 5 2000 8 0 0 0 0 0\n"
                       "cpu2 10 0 5 3000 16 0 1 0 0 0\n"
                       "intr 12345 1 2 3\n"
                       "ctxt 999\n";
    CHECK(hs_cpu_room_parse(stat, &cpus, &idle));
    CHECK_EQ(idle, 1000 + 4 + 3000 + 16); /* cpu0 and cpu2: idle and iowait; not cpu1 */
    CPU_ZERO(&cpus);
    CPU_SET(5, &cpus);
    CHECK(!hs_cpu_room_parse(stat, &cpus, &idle)); /* none of the counted CPUs is listed */
    CHECK_EQ(idle, 0);
    CPU_SET(0, &cpus);
    /* A cut-off last line and a line with too few numbers are not counted. */
    CHECK(hs_cpu_room_parse("cpu0 1 2 3 40 5\ncpu5 1 2 3 4", &cpus, &idle));
    CHECK_EQ(idle, 45);
    CHECK(!hs_cpu_room_parse("cpu0 1 2 3\ncpux 1 2 3 4 5\n", &cpus, &idle));
    CHECK(!hs_cpu_room_parse("", &cpus, &idle));
    check_context(NULL);
}

/* Keeps this thread on a CPU for ms milliseconds. */
static void spin_ms(unsigned ms)
{
    uint64_t end = hs_monotonic_ns() + ms * 1000000ull;
    while (hs_monotonic_ns() < end)
        continue;
}

static void test_cpu_room_probe(void)
{
    check_context("cpu room: probe");
    /* On one CPU only, so that its idle time cannot stand in for this thread's own: the
     * room must then come from the thread's CPU time (an idle machine would hide a probe
     * that does not count it). */
    cpu_set_t old, one;
    CHECK(sched_getaffinity(0, sizeof(old), &old) == 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
    struct hs_cpu_room r;
    CHECK(hs_cpu_room_open(&r));
    CHECK_EQ(CPU_COUNT(&r.cpus), 1);
    CHECK(hs_cpu_room_elapsed_ns(&r) == UINT64_MAX); /* no stretch yet */
    hs_cpu_room_restart(&r);
    uint64_t t0 = hs_monotonic_ns(), own0 = hs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    spin_ms(200);
    uint64_t t1 = hs_monotonic_ns(), own1 = hs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    CHECK(hs_cpu_room_elapsed_ns(&r) >= 200000000ull);
    double room = hs_cpu_room_take(&r);
    /* The share of the CPU this thread got (all of it on a quiet machine, less beside the
     * other tests ctest runs) is room it took; the CPU's idle time can only add to it, and
     * one CPU has no more than one CPU of room (plus a tick of /proc/stat's rounding). */
    double own = (double)(own1 - own0) / (double)(t1 - t0);
    CHECK(room >= own * 0.9 - 0.05);
    CHECK(room <= 1.1);
    CHECK(hs_cpu_room_elapsed_ns(&r) < 200000000ull); /* take starts the next stretch */
    hs_cpu_room_close(&r);
    CHECK(sched_setaffinity(0, sizeof(old), &old) == 0);
    /* A probe that cannot read says there is room. */
    struct hs_cpu_room blind = {.fd = -1};
    hs_cpu_room_restart(&blind);
    CHECK(hs_cpu_room_take(&blind) == HS_CPU_ROOM_UNKNOWN);
    check_context(NULL);
}

static int g_stop_spinners;

static void *spinner(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_stop_spinners, __ATOMIC_RELAXED))
        continue;
    return NULL;
}

static void test_no_room_pauses_and_free_lets_go(void)
{
    check_context("no room: the worker pauses, a freed queue is let go");
    struct hs_symbolizer *s = own_symbolizer();
    struct hs_presym *ps = hs_presym_new(s);
    CHECK(ps != NULL);
    enum { N = 100000 };
    uintptr_t *pcs = spread_pcs(N);
    hs_presym_add(ps, pcs, N);
    struct hs_presym_stats st = {0};
    for (int i = 0; i < 6000 && st.symbolized == 0; i++) {
        spin_ms(10);
        hs_presym_get_stats(ps, &st);
    }
    CHECK(st.symbolized > 0); /* batches are going through */
    /* Twice as many spinning threads as CPUs: the worker's share stays below its room. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nspin = (size_t)(ncpu > 0 ? ncpu : 1) * 2;
    pthread_t *th = calloc(nspin, sizeof(*th));
    CHECK(th != NULL);
    __atomic_store_n(&g_stop_spinners, 0, __ATOMIC_RELAXED);
    for (size_t i = 0; i < nspin; i++)
        CHECK(pthread_create(&th[i], NULL, spinner, NULL) == 0);
    hs_presym_set_idle_only(true);
    /* pcs keep coming, so that the worker has a batch in hand when its gate closes. */
    for (int i = 0; i < 3000 && st.paused == 0; i++) {
        spin_ms(10);
        hs_presym_get_stats(ps, &st);
        if (st.queued - st.symbolized < N / 2)
            hs_presym_add(ps, pcs, N);
    }
    CHECK(st.paused > 0);
    CHECK(st.symbolized < st.queued);
    /* Freed while the worker waits for room in the middle of its batch: returns now, not
     * when the spinners stop. */
    uint64_t t0 = hs_monotonic_ns();
    hs_presym_free(ps);
    CHECK(hs_monotonic_ns() - t0 < 10000000000ull);
    __atomic_store_n(&g_stop_spinners, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < nspin; i++)
        pthread_join(th[i], NULL);
    hs_presym_set_idle_only(false);
    hs_symbolizer_free(s);
    free(th);
    free(pcs);
    check_context(NULL);
}

static void test_null(void)
{
    check_context("NULL");
    hs_presym_free(NULL);
    uintptr_t pc = 1;
    hs_presym_add(NULL, &pc, 1);
    check_context(NULL);
}

int main(void)
{
    /* ctest runs tests side by side: the worker must not wait for an idle CPU here. */
    hs_presym_set_idle_only(false);
    test_cpu_room_parse();
    test_cpu_room_probe();
    test_queued_pcs_are_symbolized();
    test_shared_with_this_thread();
    test_freed_while_busy();
    test_no_room_pauses_and_free_lets_go();
    test_null();
    return check_report();
}
