/* test_unreachable_sweep.c: hs_mu_sweep end to end (src/memunreachable/sweep.c) in this
 * process, against a fake heap and a synthetic capture: roots from a data mapping, a thread
 * stack and registers, leaks folded and grouped, the result through a pipe; a failing heap;
 * a PROT_NONE block; the signal dispositions restored afterwards; the same result twice;
 * and no allocation from glibc during any sweep (count_allocs.h).
 */
#define _GNU_SOURCE
#include "capture.h"
#include "check.h"
#include "count_allocs.h"
#include "result_codec.h"
#include "test_unreachable_fake_heap.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define PG 4096ul

static struct hs_arena g_arena;
static char g_maps[4096];

struct scene {
    uint8_t *m;
    struct hs_mu_thread thread;
    struct hs_mu_capture cap;
};

/* P0: a file's .data (root), P1-P4: a thread stack (SP in P2), P4-P5: excluded memory. */
static void make_scene(struct scene *s)
{
    s->m = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t b = (uintptr_t)s->m;
    int n = snprintf(g_maps, sizeof(g_maps),
                     "%lx-%lx rw-p 00002000 08:01 77 /usr/lib/libdata.so\n"
                     "%lx-%lx rw-p 00000000 00:00 0\n"
                     "%lx-%lx rw-p 00000000 00:00 0\n",
                     (unsigned long)b, (unsigned long)(b + PG), (unsigned long)(b + PG),
                     (unsigned long)(b + 4 * PG), (unsigned long)(b + 4 * PG),
                     (unsigned long)(b + 5 * PG));
    memset(&s->thread, 0, sizeof(s->thread));
    s->thread.sp = b + 2 * PG + 0x100;
    s->thread.num_regs = 2;
    s->thread.regs[0] = s->thread.sp;
    static struct hs_mu_range excluded;
    excluded.begin = b + 4 * PG;
    excluded.end = b + 5 * PG;
    s->cap = (struct hs_mu_capture){
        .pid = getpid(),
        .threads = &s->thread,
        .num_threads = 1,
        .maps_text = g_maps,
        .maps_len = (size_t)n,
        .excluded = &excluded,
        .num_excluded = 1,
    };
}

static int sweep_and_read(const struct scene *s, const struct hs_mu_heap_source *heap, size_t limit,
                          struct UnreachableMemoryInfo *info, size_t *skipped)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    count_allocs_start();
    int r = hs_mu_sweep(&s->cap, heap, limit, fds[1], &g_arena);
    CHECK_EQ(count_allocs_stop(), 0); /* its own arena only: nothing from glibc's heap */
    close(fds[1]);
    int rr = hs_mu_result_read_limited(fds[0], info, limit, 5000, skipped);
    close(fds[0]);
    CHECK_EQ(rr, r);
    return r;
}

static void test_sweep(void)
{
    check_context("a whole sweep");
    fake_reset();
    struct scene s;
    make_scene(&s);
    uintptr_t *data = (uintptr_t *)s.m;
    uintptr_t *stack_sp = (uintptr_t *)s.thread.sp;

    uintptr_t *g = fake_block(40);   /* held by a global */
    uintptr_t *st = fake_block(24);  /* held by the stack above SP */
    uintptr_t *rz = fake_block(24);  /* held in the red zone below SP */
    uintptr_t *old = fake_block(24); /* only in the stack below the red zone: leaked */
    uintptr_t *reg = fake_block(16); /* held by a register */
    uintptr_t *ex = fake_block(16);  /* only in excluded memory: leaked */
    uintptr_t *a = fake_block(100);  /* leaked, referencing b */
    uintptr_t *b = fake_block(50);
    uintptr_t *c1 = fake_block(30), *c2 = fake_block(30); /* leaked, same backtrace */
    uintptr_t *child = fake_block(8);                     /* reached from g */
    data[10] = (uintptr_t)g + 8;
    g[4] = (uintptr_t)child;
    stack_sp[3] = (uintptr_t)st;
    stack_sp[-5] = (uintptr_t)rz;
    stack_sp[-40] = (uintptr_t)old;
    s.thread.regs[1] = (uintptr_t)reg + 15;
    ((uintptr_t *)(s.m + 4 * PG))[0] = (uintptr_t)ex;
    a[7] = (uintptr_t)b;
    memcpy(a, "leaky", 6);
    static const uintptr_t bt_c[] = {0x111, 0x222};
    static const uintptr_t bt_a[] = {0x333};
    fake_set_backtrace(c1, 2, bt_c);
    fake_set_backtrace(c2, 2, bt_c);
    fake_set_backtrace(a, 1, bt_a);

    struct sigaction before, after;
    sigaction(SIGSEGV, NULL, &before);
    struct UnreachableMemoryInfo info;
    size_t skipped = 99;
    CHECK_EQ(sweep_and_read(&s, &g_fake_heap, 100, &info, &skipped), 0);
    sigaction(SIGSEGV, NULL, &after);
    CHECK(before.sa_handler == after.sa_handler); /* SA_RESTORER may have been added */

    CHECK_EQ(skipped, 0);
    CHECK_EQ(info.num_allocations, 11);
    CHECK_EQ(info.allocation_bytes, 40 + 24 * 3 + 16 * 2 + 100 + 50 + 30 * 2 + 8);
    CHECK_EQ(info.num_leaks, 6); /* old, ex, a, b, c1, c2 */
    CHECK_EQ(info.leak_bytes, 24 + 16 + 100 + 50 + 60);
    CHECK_EQ(info.num_reported_leaks, 4); /* a(+b), c1(+c2), old, ex */
    const struct UnreachableLeak *L = info.leaks;
    if (info.num_reported_leaks == 4) {
        CHECK_EQ(L[0].begin, (uintptr_t)a);
        CHECK_EQ(L[0].total_size, 150);
        CHECK_EQ(L[0].referenced_count, 1);
        CHECK_EQ(L[0].referenced_size, 50);
        CHECK_EQ(L[0].num_backtrace_frames, 1);
        CHECK_EQ(L[0].backtrace_frames[0], 0x333);
        CHECK_EQ(L[0].contents_length, 32);
        CHECK_STREQ((const char *)L[0].contents, "leaky");
        CHECK_EQ(L[1].begin, (uintptr_t)c1);
        CHECK_EQ(L[1].similar_count, 1);
        CHECK_EQ(L[1].total_size, 60);
        CHECK_EQ(L[2].begin, (uintptr_t)old);
        CHECK_EQ(L[3].begin, (uintptr_t)ex);
    }
    free(info.leaks);

    check_context("running twice gives the same result");
    struct UnreachableMemoryInfo again;
    CHECK_EQ(sweep_and_read(&s, &g_fake_heap, 100, &again, NULL), 0);
    CHECK_EQ(again.num_leaks, 6);
    CHECK_EQ(again.num_reported_leaks, 4);
    free(again.leaks);

    check_context("limit 1");
    CHECK_EQ(sweep_and_read(&s, &g_fake_heap, 1, &again, NULL), 0);
    CHECK_EQ(again.num_leaks, 6);
    CHECK_EQ(again.num_reported_leaks, 1);
    free(again.leaks);

    check_context("a referenced PROT_NONE block");
    uint8_t *prot = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ((uintptr_t *)prot)[0] = (uintptr_t)old; /* invisible once protected */
    fake_add(prot, PG);
    mprotect(prot, PG, PROT_NONE);
    data[11] = (uintptr_t)prot;
    CHECK_EQ(sweep_and_read(&s, &g_fake_heap, 100, &again, &skipped), 0);
    CHECK_EQ(skipped, 1);
    CHECK_EQ(again.num_allocations, 12);
    CHECK_EQ(again.num_leaks, 6);
    free(again.leaks);
    munmap(prot, PG);
    munmap(s.m, 8 * PG);
}

static int failing_iterate(uintptr_t base, size_t size,
                           void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    (void)base, (void)size, (void)callback, (void)arg;
    return -1;
}

static void test_failures(void)
{
    check_context("a heap that cannot be listed");
    struct scene s;
    make_scene(&s);
    struct hs_mu_heap_source bad = {.iterate = failing_iterate};
    struct UnreachableMemoryInfo info;
    CHECK_EQ(sweep_and_read(&s, &bad, 100, &info, NULL), -ENOTSUP);
    CHECK(info.leaks == NULL);
    struct hs_mu_heap_source none = {0};
    CHECK_EQ(sweep_and_read(&s, &none, 100, &info, NULL), -ENOTSUP);

    check_context("an empty heap");
    fake_reset();
    CHECK_EQ(sweep_and_read(&s, &g_fake_heap, 100, &info, NULL), 0);
    CHECK_EQ(info.num_allocations, 0);
    CHECK_EQ(info.num_leaks, 0);
    free(info.leaks);

    check_context("the reader is gone: the sweep reports EPIPE, SIGPIPE does not kill");
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    close(fds[0]);
    CHECK_EQ(hs_mu_sweep(&s.cap, &g_fake_heap, 100, fds[1], &g_arena), -EPIPE);
    close(fds[1]);
    munmap(s.m, 8 * PG);
}

int main(void)
{
    test_sweep();
    test_failures();
    return check_report();
}
