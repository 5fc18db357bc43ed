/* hs_assert.h: run-time checks of the tools' internal invariants, allocation-free.
 *
 * Two levels, as mimalloc's mi_assert_internal / mi_assert_expensive, chosen at build time
 * with HEAPSCOPE_ASSERT_LEVEL (CMake option of the same name):
 *   0  no checks (the conditions are not evaluated);
 *   1  hs_assert: cheap O(1) checks (a bound, a state, a slot that must be free). On by
 *      default in every build type, release included: a native memory tool whose own
 *      invariant broke is about to corrupt the program it watches, and stopping with the
 *      reason is kinder than a wrong report or a crash far away. Their cost on the hottest
 *      path (bench/malloc_bench.c under the shim) is in docs/benchmarks.md;
 *   2  also hs_assert_expensive and the code under HS_ASSERT_EXPENSIVE: walks of a whole
 *      table (consistency of a hash table after it grows, a heap dump's view). For test and
 *      sanitizer builds (build-asan runs with it), never for users.
 *
 * A failed check logs one line through the log path (log.h: stderr or HEAPSCOPE_LOG_FILE),
 *   "<program>[<pid>] heapscope: assertion failed: <condition> at <file>:<line> in <function>()"
 * after the lines of a report this thread had gathered, then calls abort(). Usable inside
 * malloc, signal handlers and the unreachable-memory collector (no allocation, no stdio).
 * A check that fails while the failure is being logged (an invariant of the log or the
 * formatter itself) writes a fixed line and aborts at once.
 */
#ifndef HEAPSCOPE_COMMON_HS_ASSERT_H
#define HEAPSCOPE_COMMON_HS_ASSERT_H

#ifndef HEAPSCOPE_ASSERT_LEVEL
#define HEAPSCOPE_ASSERT_LEVEL 1
#endif

/* The source file's name without its directory when the compiler can say it. */
#ifdef __FILE_NAME__
#define HS_ASSERT_FILE __FILE_NAME__
#else
#define HS_ASSERT_FILE __FILE__
#endif

/* Logs the failed condition and aborts. */
__attribute__((noreturn, cold)) void hs_assert_fail(const char *cond, const char *file, int line,
                                                    const char *func);

#if HEAPSCOPE_ASSERT_LEVEL >= 1
#define hs_assert(cond)                                                                            \
    (__builtin_expect(!!(cond), 1) ? (void)0                                                       \
                                   : hs_assert_fail(#cond, HS_ASSERT_FILE, __LINE__, __func__))
#else
/* Not evaluated, but still compiled: a check cannot rot in the builds that skip it. */
#define hs_assert(cond) ((void)sizeof(!(cond)))
#endif

#if HEAPSCOPE_ASSERT_LEVEL >= 2
#define HS_ASSERT_EXPENSIVE 1
#define hs_assert_expensive(cond) hs_assert(cond)
#else
#define HS_ASSERT_EXPENSIVE 0
#define hs_assert_expensive(cond) ((void)sizeof(!(cond)))
#endif

#endif
