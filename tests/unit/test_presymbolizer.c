/* test_presymbolizer.c: unit tests of the daemon's background symbolizing
 * (src/profiler/daemon/presymbolizer.c), on this process's own mappings.
 *
 *  - queued pcs are all symbolized by the worker, and give the names of this test's functions
 *    when symbolized again under the lock;
 *  - the symbolizer is used by this thread (lookups and maps declared again, under the lock)
 *    while the worker goes through 20,000 pcs: run under ThreadSanitizer by make sanitize;
 *  - a queue freed while the worker is busy with it returns only once the worker left it, and
 *    another queue is still served;
 *  - the idle-CPU gate reads /proc/loadavg's runnable count right (it is turned off for the
 *    other tests, which ctest runs beside others);
 *  - NULL and empty calls are no-ops.
 */
#include "check.h"
#include "presymbolizer.h"
#include "symbolizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

static void test_cpu_idle(void)
{
    check_context("idle CPU gate");
    CHECK(hs_presym_cpu_idle("0.50 0.40 0.30 1/234 5678\n", 2));
    CHECK(hs_presym_cpu_idle("0.50 0.40 0.30 2/234 5678\n", 2));
    CHECK(!hs_presym_cpu_idle("2.50 2.40 2.30 3/234 5678\n", 2));
    CHECK(!hs_presym_cpu_idle("9.00 9.00 9.00 17/1234 5678\n", 16));
    CHECK(hs_presym_cpu_idle("9.00 9.00 9.00 16/1234 5678\n", 16));
    CHECK(hs_presym_cpu_idle("", 2)); /* unparsable: idle */
    CHECK(hs_presym_cpu_idle("0.50 0.40 0.30 x/234 5678", 2));
    CHECK(hs_presym_cpu_idle("5/9", 0));
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
    test_cpu_idle();
    test_queued_pcs_are_symbolized();
    test_shared_with_this_thread();
    test_freed_while_busy();
    test_null();
    return check_report();
}
