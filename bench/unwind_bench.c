/* unwind_bench: cost of unwinding a copied stack in the profiler daemon
 * (src/profiler/daemon/unwinder.c).
 *
 * Takes samples as the profiler's client does (HS_UNWIND_CAPTURE_REGS, then the stack from rsp
 * to the end of the thread's stack, at most 64 KiB) at the end of call chains of ~10, ~20 and
 * ~40 frames: the unwinder test's fixture (tests/unit/unwinder_fixture.c), built with -O2
 * -fomit-frame-pointer, with a trip through libc's qsort (the comparator continues the chain).
 * Several variants per depth (the qsort trip at different levels) make different pcs. Then,
 * on one core, for each approach:
 *   cached    hs_unwind, HS_UNWIND_MODE_CACHED (the default: rules cached per pc)
 *   dwfl      hs_unwind, HS_UNWIND_MODE_DWFL (dwfl_getthread_frames per sample, Dwfl kept)
 *   libunwind libunwind's remote unwinder (unw_init_remote, accessors reading the copy,
 *             _UPT_find_proc_info for the unwind tables, UNW_CACHE_GLOBAL)
 * it unwinds every sample once (warm-up, checking that all approaches agree), then times each
 * unwind (median and p90 per sample) and the throughput of a tight loop (samples/s). It also
 * prints the cost of a first unwind with an empty rule table and the table's memory.
 *
 * Then, in-process: malloc debug's capture (hs_backtrace_capture: the walker with cached CFA
 * rules of cfi_unwind.c, beside hs_backtrace_capture_unwinder: libunwind's unw_backtrace with
 * its per-thread cache, what hs_backtrace_capture was before) from a call chain 8, 32 and 128 frames deep, keeping at most
 * 16 frames (backtrace's default: 22 with the shim's own frames, which are unwound and
 * dropped) or 256 (backtrace=256). Only the frames kept are unwound, so past that count
 * the cost does not grow with the depth of the stack.
 *
 * Usage: unwind_bench [seconds per measurement, default 0.5]
 */
#define _GNU_SOURCE
#include "backtrace.h"
#include "stack_copy.h"
#include "unwinder.h"
#include "unwinder_fixture.h"

#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <libunwind.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STACK_MAX (64 * 1024)
#define MAX_FRAMES 128
#define VARIANTS 8
#define NDEPTHS 4 /* ~10, ~20, ~40 frames, and ~20 with a stack-realigning frame */

struct sample {
    struct hs_unwind_regs regs;
    size_t len;
    uint8_t stack[STACK_MAX];
};

static uintptr_t g_stack_end;

/* ---- Taking samples ---------------------------------------------------------------------- */

/* The leaf of the test fixture's call chain (tests/unit/unwinder_fixture.c: -O2
 * -fomit-frame-pointer functions, a trip through libc's qsort, a stack-realigning frame):
 * a sample as the client takes it. */
__attribute__((noinline)) static void capture(void *arg)
{
    struct sample *s = arg;
    HS_UNWIND_CAPTURE_REGS(&s->regs);
    s->len = hs_stack_copy(s->regs.rsp, s->stack, STACK_MAX);
    __asm__ volatile("" ::: "memory");
}

static void take_sample(struct sample *s, int levels, int qsort_at, int realign_at)
{
    hs_uwfix_run(levels, qsort_at, realign_at, capture, s);
}

/* ---- libunwind remote ---------------------------------------------------------------------- */

static struct {
    const struct sample *s;
    int mem_fd;
    void *upt;
} g_lu;

static int lu_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need,
                             void *arg)
{
    (void)arg;
    return _UPT_find_proc_info(as, ip, pi, need, g_lu.upt);
}

static void lu_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)arg;
    _UPT_put_unwind_info(as, pi, g_lu.upt);
}

static int lu_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
    (void)as, (void)dil, (void)arg;
    return -UNW_ENOINFO;
}

/* The stack from the copy; the unwind tables libunwind reads from the target's memory. */
static int lu_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                         void *arg)
{
    (void)as, (void)arg;
    if (write)
        return -UNW_EINVAL;
    const struct sample *s = g_lu.s;
    uint64_t off = addr - s->regs.rsp;
    if (off <= s->len && s->len - off >= 8) {
        memcpy(val, s->stack + off, 8);
        return 0;
    }
    if (addr >= s->regs.rsp && addr < g_stack_end)
        return -UNW_EINVAL; /* past the copy */
    if (pread(g_lu.mem_fd, val, 8, (off_t)addr) == 8)
        return 0;
    return -UNW_EINVAL;
}

static int lu_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                         void *arg)
{
    (void)as, (void)arg;
    if (write || reg < 0 || reg >= HS_UNWIND_NREGS)
        return -UNW_EBADREG;
    *val = g_lu.s->regs.dwarf[reg];
    return 0;
}

static int lu_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                           void *arg)
{
    (void)as, (void)reg, (void)val, (void)write, (void)arg;
    return -UNW_EBADREG;
}

static int lu_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
    (void)as, (void)c, (void)arg;
    return -UNW_EINVAL;
}

static int lu_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                            unw_word_t *off, void *arg)
{
    (void)as, (void)addr, (void)buf, (void)len, (void)off, (void)arg;
    return -UNW_ENOINFO;
}

static unw_accessors_t lu_accessors = {
    .find_proc_info = lu_find_proc_info,
    .put_unwind_info = lu_put_unwind_info,
    .get_dyn_info_list_addr = lu_get_dyn_info_list_addr,
    .access_mem = lu_access_mem,
    .access_reg = lu_access_reg,
    .access_fpreg = lu_access_fpreg,
    .resume = lu_resume,
    .get_proc_name = lu_get_proc_name,
};

static unw_addr_space_t g_as;

static size_t lu_unwind(const struct sample *s, uintptr_t *pcs, size_t max)
{
    g_lu.s = s;
    unw_cursor_t cur;
    if (unw_init_remote(&cur, g_as, NULL) < 0)
        return 0;
    size_t n = 0;
    bool exact = true; /* the innermost frame, or one a signal interrupted */
    do {
        unw_word_t ip;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        pcs[n++] = exact ? ip : ip - 1; /* call sites, as hs_unwind returns them */
        exact = unw_is_signal_frame(&cur) > 0;
    } while (n < max && unw_step(&cur) > 0);
    return n;
}

/* ---- Measuring ------------------------------------------------------------------------------ */

enum { A_CACHED, A_DWFL, A_LIBUNWIND, NAPPROACHES };
static const char *const approach_names[] = {"cached", "dwfl", "libunwind"};

static struct hs_unwinder *g_unw;

static size_t unwind_with(int a, const struct sample *s, uintptr_t *pcs)
{
    if (a == A_LIBUNWIND)
        return lu_unwind(s, pcs, MAX_FRAMES);
    hs_unwinder_set_mode(g_unw, a == A_CACHED ? HS_UNWIND_MODE_CACHED : HS_UNWIND_MODE_DWFL);
    return hs_unwind(g_unw, &s->regs, s->stack, s->len, pcs, MAX_FRAMES, NULL);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct result {
    double median_us, p90_us, per_sec;
    size_t frames;
};

static struct result measure(int a, struct sample **samples, size_t nsamples, double seconds)
{
    struct result r = {0};
    uintptr_t pcs[MAX_FRAMES];
    size_t cap = 1 << 16, n = 0;
    double *t = malloc(cap * sizeof *t);
    /* Per-sample times. */
    double start = now_ns();
    while (n < cap && now_ns() - start < seconds * 1e9 / 2) {
        const struct sample *s = samples[n % nsamples];
        double t0 = now_ns();
        r.frames = unwind_with(a, s, pcs);
        t[n++] = now_ns() - t0;
    }
    qsort(t, n, sizeof *t, cmp_double);
    r.median_us = t[n / 2] / 1e3;
    r.p90_us = t[n * 9 / 10] / 1e3;
    free(t);
    /* Throughput. */
    size_t count = 0;
    start = now_ns();
    double el;
    do {
        for (size_t i = 0; i < nsamples; i++)
            unwind_with(a, samples[i], pcs);
        count += nsamples;
        el = now_ns() - start;
    } while (el < seconds * 1e9 / 2);
    r.per_sec = (double)count / (el / 1e9);
    return r;
}

/* ---- In-process capture (malloc debug's) --------------------------------------------------- */

struct local_capture {
    size_t (*capture)(uintptr_t *frames, size_t max_frames, size_t skip);
    size_t max_frames;
    double seconds;
    double median_us;
    size_t frames;
};

static __attribute__((noinline)) void local_measure(struct local_capture *c)
{
    uintptr_t frames[HS_BACKTRACE_MAX_FRAMES];
    size_t cap = 1 << 16, n = 0;
    double *t = malloc(cap * sizeof *t);
    double start = now_ns();
    while (n < cap && now_ns() - start < c->seconds * 1e9) {
        double t0 = now_ns();
        c->frames = c->capture(frames, c->max_frames, 0);
        t[n++] = now_ns() - t0;
    }
    qsort(t, n, sizeof *t, cmp_double);
    c->median_us = t[n / 2] / 1e3;
    free(t);
}

/* Calls local_measure `depth` frames down (each level a real frame: no tail call). */
static __attribute__((noinline)) void local_at_depth(int depth, struct local_capture *c)
{
    if (depth <= 1)
        local_measure(c);
    else
        local_at_depth(depth - 1, c);
    __asm__ volatile("" ::: "memory");
}

static void local_report(double seconds)
{
    static const int depths[] = {8, 32, 128};
    static const size_t maxes[] = {16 + 6, HS_BACKTRACE_MAX_FRAMES};
    printf("in-process capture (malloc debug's), median us per capture: hs_backtrace_capture\n"
           "(cached CFA rules, cfi_unwind.c) / hs_backtrace_capture_unwinder (libunwind alone)\n");
    printf("%-8s  %-34s  %-34s\n", "depth", "at most 22 frames (backtrace)", "at most 256 frames");
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        printf("%-8d", depths[d]);
        for (size_t m = 0; m < 2; m++) {
            struct local_capture c = {hs_backtrace_capture, maxes[m], seconds / 4, 0, 0};
            struct local_capture u = {hs_backtrace_capture_unwinder, maxes[m], seconds / 4, 0, 0};
            local_at_depth(depths[d], &c);
            local_at_depth(depths[d], &u);
            char cell[64];
            snprintf(cell, sizeof cell, "%.2f / %.2f us (%zu frames)", c.median_us, u.median_us,
                     c.frames);
            printf("  %-34s", cell);
        }
        printf("\n");
    }
}

static char *read_text(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n == cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    if (seconds <= 0)
        seconds = 0.5;

    /* One core. */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
    sched_setaffinity(0, sizeof set, &set);

    pthread_attr_t attr;
    void *addr;
    size_t size;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    g_stack_end = (uintptr_t)addr + size;

    /* Levels giving ~10, ~20, ~40 frames: two frames a level (the dispatcher and a function),
     * the qsort trip 5 more (qsort_r, two msort_with_tmp, the comparator and its level), and 7
     * around (capture, the last dispatcher, take_sample, main and libc's start). The variants
     * move the qsort trip. */
    static const int levels[NDEPTHS] = {2, 4, 14, 4};
    static const bool with_qsort[NDEPTHS] = {false, true, true, true};
    static struct sample *samples[NDEPTHS][VARIANTS];
    for (int d = 0; d < NDEPTHS; d++)
        for (int v = 0; v < VARIANTS; v++) {
            samples[d][v] = malloc(sizeof(struct sample));
            int qsort_at = with_qsort[d] ? 1 + v % levels[d] : 0;
            int realign_at = d == 3 ? 1 + (qsort_at % levels[d]) : 0;
            take_sample(samples[d][v], levels[d], qsort_at, realign_at);
        }

    int mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    g_unw = hs_unwinder_new(getpid(), mem_fd);
    size_t maps_len = 0;
    char *maps = read_text("/proc/self/maps", &maps_len);
    if (!g_unw || !maps || hs_unwinder_set_maps(g_unw, maps, maps_len) != 0) {
        fprintf(stderr, "unwind_bench: cannot set up the unwinder\n");
        return 1;
    }
    free(maps);
    g_lu.mem_fd = mem_fd;
    g_lu.upt = _UPT_create(getpid());
    g_as = unw_create_addr_space(&lu_accessors, 0);
    unw_set_caching_policy(g_as, UNW_CACHE_GLOBAL);

    /* Cold: the first unwind of each depth with an empty rule table. */
    double cold_us[NDEPTHS];
    unsigned cold_misses[NDEPTHS];
    for (int d = 0; d < NDEPTHS; d++) {
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        hs_unwinder_flush_cache(g_unw);
        hs_unwinder_set_mode(g_unw, HS_UNWIND_MODE_CACHED);
        double t0 = now_ns();
        hs_unwind(g_unw, &samples[d][0]->regs, samples[d][0]->stack, samples[d][0]->len, pcs,
                  MAX_FRAMES, &res);
        cold_us[d] = (now_ns() - t0) / 1e3;
        cold_misses[d] = res.cache_misses;
    }
    hs_unwinder_flush_cache(g_unw);

    /* Warm-up, and all approaches must agree. */
    int disagree = 0;
    unsigned slow_steps = 0, fp_steps = 0;
    for (int d = 0; d < NDEPTHS; d++)
        for (int v = 0; v < VARIANTS; v++) {
            uintptr_t pcs[NAPPROACHES][MAX_FRAMES];
            size_t n[NAPPROACHES];
            for (int a = 0; a < NAPPROACHES; a++)
                n[a] = unwind_with(a, samples[d][v], pcs[a]);
            struct hs_unwind_result res;
            const struct sample *s = samples[d][v];
            hs_unwinder_set_mode(g_unw, HS_UNWIND_MODE_CACHED);
            hs_unwind(g_unw, &s->regs, s->stack, s->len, pcs[0], MAX_FRAMES, &res);
            slow_steps += res.slow_steps;
            fp_steps += res.fp_steps;
            if (res.stop != HS_UNWIND_END) {
                fprintf(stderr, "depth %d variant %d: stopped with %d\n", d, v, (int)res.stop);
                disagree = 1;
            }
            for (int a = 1; a < NAPPROACHES; a++)
                if (n[a] != n[0] || memcmp(pcs[a], pcs[0], n[0] * sizeof pcs[0][0]) != 0) {
                    fprintf(stderr, "depth %d variant %d: %s gives %zu frames, %s %zu\n", d, v,
                            approach_names[0], n[0], approach_names[a], n[a]);
                    disagree = 1;
                }
        }

    printf("unwind_bench: per-sample median/p90 (us) and samples/s on one core, %d samples per "
           "depth\n",
           VARIANTS);
    printf("%-18s", "frames");
    for (int a = 0; a < NAPPROACHES; a++)
        printf("  %-30s", approach_names[a]);
    printf("\n");
    for (int d = 0; d < NDEPTHS; d++) {
        struct result r[NAPPROACHES];
        for (int a = 0; a < NAPPROACHES; a++)
            r[a] = measure(a, samples[d], VARIANTS, seconds);
        char label[32];
        snprintf(label, sizeof label, "%zu%s", r[0].frames, d == 3 ? " (1 DRAP frame)" : "");
        printf("%-18s", label);
        for (int a = 0; a < NAPPROACHES; a++) {
            char cell[64];
            snprintf(cell, sizeof cell, "%.2f / %.2f us, %.0f/s", r[a].median_us, r[a].p90_us,
                     r[a].per_sec);
            printf("  %-30s", cell);
        }
        printf("\n");
    }
    struct hs_unwind_stats st;
    hs_unwinder_stats(g_unw, &st);
    printf("cold (empty rule table, cached mode):");
    for (int d = 0; d < 3; d++)
        printf(" %.1f us for %u rules;", cold_us[d], cold_misses[d]);
    printf("\nrule table: %zu rules, %zu bytes (32 bytes a rule, %zu slots); cached mode: %u "
           "libdwfl steps, %u frame-pointer steps in the %d distinct samples\n",
           st.cache_entries, st.cache_bytes, st.cache_bytes / 32, slow_steps, fp_steps,
           NDEPTHS * VARIANTS);

    local_report(seconds);

    unw_destroy_addr_space(g_as);
    _UPT_destroy(g_lu.upt);
    hs_unwinder_free(g_unw);
    close(mem_fd);
    return disagree;
}
