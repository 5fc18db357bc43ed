/* unwinder_fixture.h: call chains for the unwinder's tests (test_unwinder.c).
 *
 * The fixture is built as two shared libraries from unwinder_fixture.c, with -O2
 * -fomit-frame-pointer (like Debian's libc): libuwfix.so, which test_unwinder links, and
 * libuwfix_dl.so, which is only ever dlopen()ed (by a forked child, then by the test itself to
 * check that new maps are picked up).
 */
#ifndef HEAPSCOPE_TESTS_UNWINDER_FIXTURE_H
#define HEAPSCOPE_TESTS_UNWINDER_FIXTURE_H

typedef void (*hs_uwfix_leaf_fn)(void *arg);

/* Calls leaf(arg) under `levels` levels of this library's functions (two frames each: a
 * dispatcher and one of several frame layouts: small, variable-length array (rbp-based CFA),
 * many callee-saved registers, large frame), the level numbered qsort_at (if in
 * [1, levels]) going through libc's qsort, whose comparator continues the chain, and the level
 * numbered realign_at (if in [1, levels]) through a function that realigns the stack with a
 * DRAP register (CFA = r10, then a CFA expression: CFI that the cached rules cannot hold). */
void hs_uwfix_run(int levels, int qsort_at, int realign_at, hs_uwfix_leaf_fn leaf, void *arg);
typedef void (*hs_uwfix_run_fn)(int levels, int qsort_at, int realign_at, hs_uwfix_leaf_fn leaf,
                                void *arg);

#endif
