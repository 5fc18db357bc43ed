/* test_stack_copy.c: the client's half of a sample (registers + stack copy, stack_copy.c)
 * unwound by the daemon's half (unwinder.c), checked against libunwind at the same point:
 * on the main thread, on another thread, deep in recursion, with a small cap, and with the
 * copy bounded by what an earlier unwind of the thread read (the daemon's stack hint). */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include "check.h"
#include "proc_maps.h"
#include "stack_copy.h"
#include "unwinder.h"

#include <libunwind.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COPY_CAP (256 * 1024)
#define MAX_PCS 128

struct sample {
    struct hs_unwind_regs regs;
    unsigned char *stack;
    size_t len;
    void *expected[MAX_PCS]; /* libunwind at the capture point, innermost first */
    int num_expected;
    uintptr_t hint;   /* when not 0: the copy ends at hs_stack_copy_end(rsp, hint) */
    size_t copy_used; /* check_sample: what the unwinder read of the copy */
};

static __attribute__((noinline)) void take_sample(struct sample *s, size_t cap)
{
    HS_UNWIND_CAPTURE_REGS(&s->regs);
    if (s->hint != 0) {
        uintptr_t end = hs_stack_copy_end(s->regs.rsp, s->hint);
        s->len = end - s->regs.rsp < cap ? end - s->regs.rsp : cap;
        memcpy(s->stack, (const void *)s->regs.rsp, s->len);
    } else {
        s->len = hs_stack_copy(s->regs.rsp, s->stack, cap);
    }
    s->num_expected = unw_backtrace(s->expected, MAX_PCS);
}

static __attribute__((noinline)) void recurse(struct sample *s, int depth, size_t cap)
{
    if (depth == 0)
        take_sample(s, cap);
    else
        recurse(s, depth - 1, cap);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

static char *read_maps(size_t *len)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char *buf = malloc(1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Unwinds the sample and compares with libunwind: the unwinder's pcs from frame 1 on are the
 * call sites of the return addresses libunwind lists, each minus 1 (its frame 0 is inside
 * take_sample too; no frame here was interrupted by a signal). */
static void check_sample(const char *what, struct sample *s, int expect_truncated)
{
    size_t maps_len;
    char *maps = read_maps(&maps_len);
    struct hs_unwinder *u = hs_unwinder_new(getpid(), -1);
    CHECK(u != NULL);
    CHECK(hs_unwinder_set_maps(u, maps, maps_len) == 0);
    uintptr_t pcs[MAX_PCS];
    struct hs_unwind_result res;
    size_t n = hs_unwind(u, &s->regs, s->stack, s->len, pcs, MAX_PCS, &res);
    printf("%s: copied %zu bytes, %zu read, %zu frames (libunwind %d), stop %d\n", what,
           s->len, res.copy_used, n, s->num_expected, (int)res.stop);
    s->copy_used = res.copy_used;
    CHECK(res.copy_used <= s->len);
    CHECK(s->len > 0);
    CHECK(n >= 2);
    if (!expect_truncated) {
        /* Same frames, in order, after the capture point. */
        CHECK_EQ(n, (size_t)s->num_expected);
        for (size_t i = 1; i < n && i < (size_t)s->num_expected; i++)
            CHECK_EQ(pcs[i], (uintptr_t)s->expected[i] - 1);
    } else {
        CHECK(n < (size_t)s->num_expected);
        CHECK_EQ(res.stop, HS_UNWIND_TRUNCATED);
        for (size_t i = 1; i < n; i++)
            CHECK_EQ(pcs[i], (uintptr_t)s->expected[i] - 1);
    }
    hs_unwinder_free(u);
    free(maps);
}

static void *thread_main(void *arg)
{
    struct sample *s = arg;
    recurse(s, 5, COPY_CAP);
    check_sample("other thread", s, 0);
    /* The top of a thread's mapping holds its static TLS, which the copy skips only in part:
     * the unwinder reads less than what was copied. */
    CHECK(s->copy_used > 0 && s->copy_used < s->len);
    size_t whole = s->len;
    /* The daemon's note: where that unwind stopped reading. A copy up to it, deeper in the
     * same thread, unwinds to the same frames. */
    s->hint = s->regs.rsp + s->copy_used;
    recurse(s, 9, COPY_CAP);
    CHECK_EQ(s->regs.rsp + s->len, s->hint);
    check_sample("other thread, copy up to the hint", s, 0);
    CHECK_EQ(s->copy_used, s->len);
    CHECK(s->len < whole + 4 * 64); /* 4 more levels, without the TLS */
    /* A note that cannot be this stack's is not used: below sp, or above the frames' end. */
    uintptr_t sp = s->regs.rsp, end = hs_stack_frames_end(sp);
    CHECK_EQ(hs_stack_copy_end(sp, sp - 64), end);
    CHECK_EQ(hs_stack_copy_end(sp, end + 64), end);
    CHECK_EQ(hs_stack_copy_end(sp, 0), end);
    CHECK_EQ(hs_stack_copy_end(sp, sp + 64), sp + 64);
    s->hint = 0;
    return NULL;
}

/* The gaps the client takes from the daemon's note: only those whole inside the copy's span,
 * above its first word; and the copy without them. */
static void test_gaps(void)
{
    check_context("gaps");
    static unsigned char stack[4096];
    for (size_t i = 0; i < sizeof stack; i++)
        stack[i] = (unsigned char)(i * 7);
    uintptr_t sp = (uintptr_t)stack;
    const struct hs_stack_range noted[3] = {
        {sp + 512, sp + 1024}, {sp + 2048, sp + 2560}, {sp + 3072, sp + 3584}};
    struct hs_stack_gap g[HS_STACK_GAPS];
    CHECK_EQ(hs_stack_copy_gaps(sp, 4096, noted, 3, g), 3);
    CHECK(g[0].off == 512 && g[0].len == 512 && g[2].off == 3072 && g[2].len == 512);
    /* A span that ends inside the last one: that one is left out. */
    CHECK_EQ(hs_stack_copy_gaps(sp, 3300, noted, 3, g), 2);
    /* A stack pointer above the first (a deeper sample of the thread sees it below sp). */
    CHECK_EQ(hs_stack_copy_gaps(sp + 600, 4096 - 600, noted, 3, g), 2);
    CHECK(g[0].off == 2048 - 600 && g[1].off == 3072 - 600);
    /* Noted parts out of order (a torn note is checked before, this is the last line). */
    const struct hs_stack_range unordered[2] = {noted[1], noted[0]};
    CHECK_EQ(hs_stack_copy_gaps(sp, 4096, unordered, 2, g), 0);
    /* The copy without the gaps: the span's bytes in order, the gaps' left out. */
    static unsigned char out[4096];
    unsigned n = hs_stack_copy_gaps(sp, 4096, noted, 3, g);
    hs_stack_copy_without_gaps(out, sp, 4096, g, n);
    CHECK(memcmp(out, stack, 512) == 0);
    CHECK(memcmp(out + 512, stack + 1024, 1024) == 0);
    CHECK(memcmp(out + 1536, stack + 2560, 512) == 0);
    CHECK(memcmp(out + 2048, stack + 3584, 512) == 0);
    check_context(NULL);
}

int main(void)
{
    test_gaps();
    struct sample s;
    memset(&s, 0, sizeof(s));
    s.stack = malloc(COPY_CAP);

    recurse(&s, 3, COPY_CAP);
    check_sample("main thread", &s, 0);
    /* The whole copy lies in the main thread's [stack]. */
    struct hs_map m;
    CHECK(hs_maps_find(0, s.regs.rsp, &m));
    CHECK_STREQ(m.path, "[stack]");
    CHECK_EQ(hs_stack_end(s.regs.rsp), m.end);

    recurse(&s, 200, COPY_CAP);
    check_sample("deep recursion", &s, 0);

    recurse(&s, 200, 2048); /* a copy too small for the whole stack: a clean prefix */
    check_sample("small cap", &s, 1);

    pthread_t t;
    pthread_create(&t, NULL, thread_main, &s);
    pthread_join(t, NULL);

    CHECK_EQ(hs_stack_copy(0x10, s.stack, 64), 0); /* no mapping there */
    free(s.stack);
    return check_report();
}
