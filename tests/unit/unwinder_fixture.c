/* unwinder_fixture.c: call chains with varied frame layouts (see unwinder_fixture.h). Built with
 * -O2 -fomit-frame-pointer -fno-optimize-sibling-calls: every call stays a call, and only the
 * functions that need one (variable-length arrays) use rbp as a frame base. */
#include "unwinder_fixture.h"

#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

struct fix_ctx {
    int left;
    int qsort_at;
    int realign_at;
    hs_uwfix_leaf_fn leaf;
    void *arg;
    volatile unsigned sink;
};

static __thread struct fix_ctx *t_qsort_ctx;

static void fix_next(struct fix_ctx *c);

__attribute__((noinline)) static void fix_plain(struct fix_ctx *c)
{
    c->left--;
    fix_next(c);
    c->sink++;
}

/* A variable-length array: even without frame pointers the CFA becomes rbp + 16. */
__attribute__((noinline)) static void fix_vla(struct fix_ctx *c)
{
    size_t n = (size_t)(c->left & 7) * 8 + 16;
    volatile char buf[n];
    buf[0] = 1;
    buf[n - 1] = 2;
    c->left--;
    fix_next(c);
    c->sink += buf[0] + buf[n - 1];
}

/* Values live across the call: rbx, rbp, r12-r15 get saved and used. */
__attribute__((noinline)) static void fix_saves(struct fix_ctx *c)
{
    unsigned a = c->sink * 3u, b = (unsigned)c->left * 5u, d = (unsigned)(uintptr_t)c;
    unsigned e = a ^ b, f = b + 7u, g = d * 11u;
    c->left--;
    fix_next(c);
    c->sink += a + b + d + e + f + g + (a * e) + (f ^ g);
}

__attribute__((noinline)) static void fix_big(struct fix_ctx *c)
{
    volatile char buf[600];
    buf[0] = 3;
    buf[599] = 4;
    c->left--;
    fix_next(c);
    c->sink += buf[0] + buf[599];
}

/* An over-aligned local with a variable-length array and arguments on the stack: GCC
 * realigns the stack through a DRAP register (r10), and describes the CFA with a DWARF
 * expression (DW_CFA_def_cfa_expression) and the saved registers with DW_CFA_expression. */
__attribute__((noinline)) static void fix_realign(struct fix_ctx *c, long b, long d, long e, long f,
                                                  long g, long s1, long s2)
{
    _Alignas(64) volatile char buf[64];
    buf[0] = (char)(s1 + s2);
    volatile char vla[(c->left & 15) + 8];
    vla[0] = 1;
    c->left--;
    fix_next(c);
    c->sink += (unsigned)(buf[0] + vla[0] + b + d + e + f + g + s2);
}

/* The comparator continues the chain on its first call, from inside libc's merge sort. */
static int fix_cmp(const void *a, const void *b)
{
    struct fix_ctx *c = t_qsort_ctx;
    if (c) {
        t_qsort_ctx = NULL;
        fix_next(c);
    }
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) static void fix_qsort(struct fix_ctx *c)
{
    int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
    c->left--;
    t_qsort_ctx = c;
    qsort(v, 8, sizeof v[0], fix_cmp);
    c->sink += (unsigned)v[0];
}

__attribute__((noinline)) static void fix_next(struct fix_ctx *c)
{
    if (c->left <= 0) {
        c->leaf(c->arg);
        c->sink++;
        return;
    }
    if (c->left == c->qsort_at) {
        fix_qsort(c);
    } else if (c->left == c->realign_at) {
        fix_realign(c, 1, 2, 3, 4, 5, c->left, 7);
    } else {
        switch (c->left % 4) {
        case 0:
            fix_plain(c);
            break;
        case 1:
            fix_vla(c);
            break;
        case 2:
            fix_saves(c);
            break;
        default:
            fix_big(c);
            break;
        }
    }
    c->sink++;
}

EXPORT void hs_uwfix_run(int levels, int qsort_at, int realign_at, hs_uwfix_leaf_fn leaf, void *arg)
{
    struct fix_ctx c = {
        .left = levels, .qsort_at = qsort_at, .realign_at = realign_at, .leaf = leaf, .arg = arg};
    fix_next(&c);
}
