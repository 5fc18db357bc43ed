/* test_cfi_unwind.c: the walker with cached CFA rules (src/common/cfi_unwind.c) gives
 * libunwind's frames: hs_backtrace_capture (walker first) against
 * hs_backtrace_capture_unwinder (libunwind alone), called from the same instruction, on a deep
 * recursion, through libc (qsort's comparator), at the end of a thread's stack, with skip and
 * a short buffer, and from a signal handler (where the walker must hand over to libunwind).
 * Each case also checks that the walker itself walked (or, for the signal, refused), so that
 * the comparison cannot pass by the fast path never running, and that its cache-only mode
 * (what hs_backtrace_capture tries first, without the capture gate) walks as well once the
 * rules are cached. The same, starting from a context taken in a function
 * (hs_cfi_capture_from, hs_backtrace_capture_from), at several depths and two call paths,
 * and from the caller's call site read through the frame pointer (HS_CFI_GET_CALLER,
 * hs_cfi_capture_from_caller), with and without a drop range.
 */
#define _GNU_SOURCE
#include "backtrace.h"
#include "cfi_unwind.h"
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#define TEST_NOINLINE __attribute__((noinline))
#else
#define TEST_NOINLINE __attribute__((noinline, noipa))
#endif
#define BARRIER() __asm__ volatile("" ::: "memory")

typedef size_t (*capture_fn)(uintptr_t *frames, size_t max, size_t skip);

/* Every capture goes through this one call instruction, so all three see the same stack. */
static TEST_NOINLINE size_t capture_with(capture_fn fn, uintptr_t *frames, size_t max, size_t skip)
{
    size_t n = fn(frames, max, skip);
    BARRIER();
    return n;
}

struct result {
    size_t fast_n, unw_n, walk_n, cached_n;
    uintptr_t fast[HS_BACKTRACE_MAX_FRAMES], unw[HS_BACKTRACE_MAX_FRAMES],
        walk[HS_BACKTRACE_MAX_FRAMES], cached[HS_BACKTRACE_MAX_FRAMES];
};

/* The walker, both ways, behind a frame of their own that they skip. */
static TEST_NOINLINE size_t walk_may_miss(uintptr_t *frames, size_t max, size_t skip)
{
    size_t n = hs_cfi_capture(frames, max, skip + 1, true);
    BARRIER();
    return n;
}

static TEST_NOINLINE size_t walk_cached(uintptr_t *frames, size_t max, size_t skip)
{
    size_t n = hs_cfi_capture(frames, max, skip + 1, false);
    BARRIER();
    return n;
}

/* One loop, so that capture_with is called from one instruction as well. The cache-only walk
 * comes right after the full one, which cached every rule it needs. */
static TEST_NOINLINE void capture_all(struct result *r, size_t max, size_t skip)
{
    capture_fn fns[4] = {hs_backtrace_capture, hs_backtrace_capture_unwinder, walk_may_miss,
                         walk_cached};
    uintptr_t *out[4] = {r->fast, r->unw, r->walk, r->cached};
    size_t n[4];
    for (int i = 0; i < 4; i++)
        n[i] = capture_with(fns[i], out[i], max, skip);
    r->fast_n = n[0];
    r->unw_n = n[1];
    r->walk_n = n[2];
    r->cached_n = n[3];
    BARRIER();
}

/* The frames agree; walked: the walker (hs_cfi_capture) did the walk itself, with the same
 * frames (call sites, as it stores them). */
static void check_same(const char *what, const struct result *r, bool walked)
{
    check_context(what);
    CHECK(r->unw_n > 0);
    CHECK_EQ(r->fast_n, r->unw_n);
    size_t n = r->fast_n < r->unw_n ? r->fast_n : r->unw_n;
    size_t first_diff = n;
    for (size_t i = 0; i < n && first_diff == n; i++)
        if (r->fast[i] != r->unw[i])
            first_diff = i;
    CHECK_EQ(first_diff, n);
    if (walked) {
        CHECK(r->walk_n != HS_CFI_FALLBACK);
        CHECK_EQ(r->walk_n, r->unw_n);
        size_t bad = n;
        for (size_t i = 0; i < n && i < r->walk_n && bad == n; i++)
            if (r->walk[i] != r->unw[i])
                bad = i;
        CHECK_EQ(bad, n);
        /* Every rule is cached now: the cache-only walk gives the same frames. */
        CHECK_EQ(r->cached_n, r->walk_n);
        CHECK(r->cached_n == HS_CFI_FALLBACK ||
              memcmp(r->cached, r->walk, r->walk_n * sizeof(uintptr_t)) == 0);
    } else {
        CHECK_EQ(r->walk_n, HS_CFI_FALLBACK);
    }
    check_context(NULL);
}

static struct result g_r;

/* Starting from a context (hs_cfi_capture_from, hs_backtrace_capture_from): the frames after
 * the function that took it, which are libunwind's from there minus its first. */
static struct result g_from, g_drop;
static uintptr_t g_drop_start, g_drop_end;
static size_t g_drop_max = 1;

/* The same walks from the caller's call site (HS_CFI_GET_CALLER,
 * hs_cfi_capture_from_caller): the same frames as from the context, with and without the
 * drop range. */
static uintptr_t g_caller[HS_BACKTRACE_MAX_FRAMES], g_caller_drop[HS_BACKTRACE_MAX_FRAMES];
static size_t g_caller_n, g_caller_drop_n;

static TEST_NOINLINE void capture_from_here(size_t max)
{
    struct hs_cfi_context here, caller;
    HS_CFI_GET_CONTEXT(&here);
    HS_CFI_GET_CALLER(&caller);
    g_from.fast_n = hs_backtrace_capture_from(&here, 0, 0, g_from.fast, max);
    g_from.walk_n = hs_cfi_capture_from(&here, g_from.walk, max, 0, 0, 0, true);
    g_from.cached_n = hs_cfi_capture_from(&here, g_from.cached, max, 0, 0, 0, false);
    /* frames[0] here is the call site in this function: the others start after it. */
    g_from.unw_n = hs_backtrace_capture_unwinder(g_from.unw, max + 1, 0);
    /* With a drop range over the first frames (set by the test). */
    g_drop.fast_n =
        hs_backtrace_capture_from(&here, g_drop_start, g_drop_end, g_drop.fast, g_drop_max);
    g_drop.walk_n = hs_cfi_capture_from(&here, g_drop.walk, g_drop_max, 0, g_drop_start,
                                        g_drop_end, true);
    /* After the walks above: every rule it needs is cached (it may not miss). */
    g_caller_n = hs_cfi_capture_from_caller(&caller, g_caller, max, 0, 0);
    g_caller_drop_n =
        hs_cfi_capture_from_caller(&caller, g_caller_drop, g_drop_max, g_drop_start, g_drop_end);
    BARRIER();
}

/* g_drop against libunwind's frames (g_from.unw after its first): leading frames in the
 * range gone, later ones kept, g_drop_max of the rest. */
static void check_drop(const char *what, bool walked)
{
    check_context(what);
    uintptr_t want[HS_BACKTRACE_MAX_FRAMES];
    size_t n = 0, dropped = 0;
    for (size_t i = 1; i < g_from.unw_n && n < g_drop_max; i++) {
        uintptr_t f = g_from.unw[i];
        if (n == 0 && f >= g_drop_start && f < g_drop_end)
            dropped++;
        else
            want[n++] = f;
    }
    CHECK(dropped > 0);
    CHECK_EQ(g_drop.fast_n, n);
    CHECK(g_drop.fast_n != n || memcmp(g_drop.fast, want, n * sizeof(uintptr_t)) == 0);
    if (walked) {
        CHECK_EQ(g_drop.walk_n, n);
        CHECK(g_drop.walk_n != n || memcmp(g_drop.walk, want, n * sizeof(uintptr_t)) == 0);
        CHECK_EQ(g_caller_drop_n, n);
        CHECK(g_caller_drop_n != n || memcmp(g_caller_drop, want, n * sizeof(uintptr_t)) == 0);
    } else {
        CHECK_EQ(g_drop.walk_n, HS_CFI_FALLBACK);
        CHECK_EQ(g_caller_drop_n, HS_CFI_FALLBACK);
    }
    check_context(NULL);
}

/* A drop range over libunwind's first k frames after the capturing function (from the last
 * g_from), which may hold later frames too. */
static void set_drop(size_t k, size_t max)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t i = 1; i <= k && i < g_from.unw_n; i++) {
        lo = g_from.unw[i] < lo ? g_from.unw[i] : lo;
        hi = g_from.unw[i] >= hi ? g_from.unw[i] + 1 : hi;
    }
    g_drop_start = lo;
    g_drop_end = hi;
    g_drop_max = max;
}

/* g_from agrees with libunwind; walked: the walker did it (else it must have refused). */
static void check_from(const char *what, bool walked)
{
    check_context(what);
    const struct result *r = &g_from;
    CHECK(r->unw_n > 1);
    size_t want = r->unw_n - 1;
    CHECK_EQ(r->fast_n, want);
    size_t bad = want;
    for (size_t i = 0; i < want && i < r->fast_n && bad == want; i++)
        if (r->fast[i] != r->unw[i + 1])
            bad = i;
    CHECK_EQ(bad, want);
    if (walked) {
        CHECK_EQ(r->walk_n, want);
        CHECK_EQ(r->cached_n, want);
        bad = want;
        for (size_t i = 0; i < want && i < r->walk_n && i < r->cached_n && bad == want; i++)
            if (r->walk[i] != r->unw[i + 1] || r->cached[i] != r->unw[i + 1])
                bad = i;
        CHECK_EQ(bad, want);
        CHECK_EQ(g_caller_n, want);
        bad = want;
        for (size_t i = 0; i < want && i < g_caller_n && bad == want; i++)
            if (g_caller[i] != r->unw[i + 1])
                bad = i;
        CHECK_EQ(bad, want);
    } else {
        CHECK_EQ(r->walk_n, HS_CFI_FALLBACK);
        CHECK_EQ(g_caller_n, HS_CFI_FALLBACK);
    }
    check_context(NULL);
}

/* Two call paths to the same depth, so that stacks differ only below the top. */
static TEST_NOINLINE int recurse_from(int depth, size_t max)
{
    if (depth == 0) {
        capture_from_here(max);
        return 1;
    }
    int v = recurse_from(depth - 1, max);
    BARRIER();
    return v + 1;
}

static TEST_NOINLINE int other_path_from(int depth, size_t max)
{
    int v = recurse_from(depth, max);
    BARRIER();
    return v + 2;
}

static TEST_NOINLINE int recurse(int depth, size_t max, size_t skip)
{
    if (depth == 0) {
        capture_all(&g_r, max, skip);
        return 1;
    }
    int v = recurse(depth - 1, max, skip);
    BARRIER();
    return v + 1;
}

static void test_deep_recursion(void)
{
    /* A cold cache: the cache-only walk reads no CFI and gives up. */
    hs_cfi_cache_clear();
    uintptr_t frames[8];
    CHECK_EQ(walk_cached(frames, 8, 0), HS_CFI_FALLBACK);
    CHECK(walk_may_miss(frames, 8, 0) != HS_CFI_FALLBACK);
    CHECK(walk_cached(frames, 8, 0) != HS_CFI_FALLBACK);

    recurse(200, HS_BACKTRACE_MAX_FRAMES, 0);
    check_same("recursion 200", &g_r, true);
    CHECK(g_r.unw_n > 200);
    /* A cold cache gives the same frames as a warm one. */
    hs_cfi_cache_clear();
    recurse(200, HS_BACKTRACE_MAX_FRAMES, 0);
    check_same("recursion 200, cold cache", &g_r, true);
    /* Cut short, and with frames skipped. */
    recurse(40, 5, 0);
    check_same("recursion 40, 5 frames", &g_r, true);
    CHECK_EQ(g_r.unw_n, 5);
    recurse(40, 8, 3);
    check_same("recursion 40, skip 3", &g_r, true);
    CHECK_EQ(g_r.unw_n, 8);
}

static void test_from_context(void)
{
    static const int depths[] = {0, 1, 5, 31, 127, 200};
    for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
        hs_cfi_cache_clear(); /* cold, then warm */
        recurse_from(depths[i], HS_BACKTRACE_MAX_FRAMES - 1);
        check_from("from a context, cold cache", true);
        recurse_from(depths[i], HS_BACKTRACE_MAX_FRAMES - 1);
        check_from("from a context", true);
        other_path_from(depths[i], HS_BACKTRACE_MAX_FRAMES - 1);
        check_from("from a context, another path", true);
        CHECK(g_from.unw_n > (size_t)depths[i] + 1);
        /* Leading frames dropped by range (here, the recursion's), in full or cut short. */
        set_drop(depths[i] + 1, HS_BACKTRACE_MAX_FRAMES);
        recurse_from(depths[i], HS_BACKTRACE_MAX_FRAMES - 1);
        check_drop("from a context, drop range", true);
        CHECK(g_drop.fast_n + (size_t)depths[i] < g_from.unw_n);
        set_drop(depths[i] + 1, 3);
        recurse_from(depths[i], HS_BACKTRACE_MAX_FRAMES - 1);
        check_drop("from a context, drop range, 3 frames", true);
        /* Cut short. */
        recurse_from(depths[i], 4);
        check_from("from a context, 4 frames", true);
        CHECK_EQ(g_from.fast_n, 4);
    }
}

/* Frames addressed from rsp, as in code built without frame pointers (gcc: this function
 * alone; clang builds keep rbp and test the same walk as above). bytes: the frame's size. */
#if defined(__clang__)
#define NO_FRAME_POINTER
#else
#define NO_FRAME_POINTER __attribute__((optimize("omit-frame-pointer")))
#endif
static TEST_NOINLINE NO_FRAME_POINTER int frame_of_6k(int depth)
{
    volatile char buf[6000];
    buf[0] = (char)depth;
    buf[sizeof(buf) - 1] = (char)depth;
    int v = recurse(depth, HS_BACKTRACE_MAX_FRAMES, 0);
    BARRIER();
    return v + buf[0] + buf[sizeof(buf) - 1];
}

static TEST_NOINLINE NO_FRAME_POINTER int frame_of_12k(int depth)
{
    volatile char buf[12000];
    buf[0] = (char)depth;
    buf[sizeof(buf) - 1] = (char)depth;
    int v = recurse(depth, HS_BACKTRACE_MAX_FRAMES, 0);
    BARRIER();
    return v + buf[0] + buf[sizeof(buf) - 1];
}

/* The caller's call site read through the frame pointer, in a caller whose frame is
 * addressed from rsp (gcc): its CFA comes from the sp that HS_CFI_GET_CALLER gives. */
static TEST_NOINLINE NO_FRAME_POINTER int rsp_frame_from(int depth)
{
    volatile char buf[200];
    buf[0] = (char)depth;
    capture_from_here(HS_BACKTRACE_MAX_FRAMES - 1);
    BARRIER();
    return buf[0] + 1;
}

/* A 6 KiB frame is walked; past 8 KiB (what a cache entry holds) libunwind takes over. */
static void test_big_frames(void)
{
    rsp_frame_from(3);
    check_from("from a context, caller without frame pointer", true);
    frame_of_6k(5);
    check_same("6 KiB frame", &g_r, true);
    frame_of_12k(5);
#if defined(__clang__)
    check_same("12 KiB frame (clang: frame pointer)", &g_r, true);
#else
    check_same("12 KiB frame", &g_r, false);
#endif
}

static int g_compared;

static int compare_ints(const void *a, const void *b)
{
    if (g_compared++ == 0) {
        capture_all(&g_r, HS_BACKTRACE_MAX_FRAMES, 0);
        capture_from_here(HS_BACKTRACE_MAX_FRAMES - 1);
    }
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The comparator runs under qsort's own frames (libc, no frame pointers: CFA from rsp). */
static void test_through_libc(void)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    g_compared = 0;
    qsort(v, 64, sizeof(v[0]), compare_ints);
    check_same("qsort comparator", &g_r, true);
    check_from("qsort comparator, from a context", true);
}

static void *thread_main(void *arg)
{
    (void)arg;
    recurse(10, HS_BACKTRACE_MAX_FRAMES, 0);
    recurse_from(10, HS_BACKTRACE_MAX_FRAMES - 1);
    return NULL;
}

/* A thread's stack ends in clone3, whose return address the CFI leaves undefined. */
static void test_thread(void)
{
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_main, NULL), 0);
    pthread_join(t, NULL);
    check_same("thread", &g_r, true);
    check_from("thread, from a context", true);
}

static void on_signal(int sig)
{
    (void)sig;
    capture_all(&g_r, HS_BACKTRACE_MAX_FRAMES, 0);
    capture_from_here(HS_BACKTRACE_MAX_FRAMES - 1);
}

/* Under a signal handler the stack goes through glibc's trampoline: libunwind's job. */
static void test_signal_frame(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
    raise(SIGUSR1);
    check_same("signal handler", &g_r, false);
    check_from("signal handler, from a context", false);
    /* libunwind's path drops the same frames: here the first one past the handler's. */
    set_drop(1, HS_BACKTRACE_MAX_FRAMES);
    raise(SIGUSR1);
    check_drop("signal handler, drop range", false);
    CHECK(g_drop.fast_n + 1 == g_from.unw_n - 1);
    set_drop(1, 2);
    raise(SIGUSR1);
    check_drop("signal handler, drop range, 2 frames", false);
}

int main(void)
{
    test_deep_recursion();
    test_from_context();
    test_through_libc();
    test_big_frames();
    test_thread();
    test_signal_frame();
    return check_report();
}
