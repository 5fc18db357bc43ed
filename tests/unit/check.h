/* check.h: the tiny assertion helper of the unit tests (no framework).
 *
 * CHECK(cond), CHECK_EQ(a, b) (compared as unsigned long long) and CHECK_STREQ(a, b) count a
 * pass or print the failing expression with its file and line and count a failure; they do
 * not stop the test. check_context() names what is being tested (printed with failures).
 * main ends with `return check_report();`, which prints "N passed, N failed" and returns
 * non-zero when anything failed. The *_at functions let helpers report their caller's line.
 */
#ifndef HEAPSCOPE_TESTS_CHECK_H
#define HEAPSCOPE_TESTS_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int check_passed;
static int check_failed;
static const char *check_ctx;

static inline void check_context(const char *ctx)
{
    check_ctx = ctx;
}

static inline bool check_at(bool ok, const char *file, int line, const char *expr)
{
    if (ok) {
        check_passed++;
        return true;
    }
    check_failed++;
    fprintf(stderr, "%s:%d: CHECK failed: %s", file, line, expr);
    if (check_ctx)
        fprintf(stderr, " [context: \"%s\"]", check_ctx);
    fputc('\n', stderr);
    return false;
}

static inline bool check_eq_at(unsigned long long a, unsigned long long b, const char *file,
                               int line, const char *ea, const char *eb)
{
    if (a == b)
        return check_at(true, file, line, NULL);
    check_at(false, file, line, ea);
    fprintf(stderr, "    %s == %llu, %s == %llu\n", ea, a, eb, b);
    return false;
}

static inline bool check_streq_at(const char *a, const char *b, const char *file, int line,
                                  const char *ea, const char *eb)
{
    if (a && b && strcmp(a, b) == 0)
        return check_at(true, file, line, NULL);
    check_at(false, file, line, ea);
    fprintf(stderr, "    %s == \"%s\"\n    %s == \"%s\"\n", ea, a ? a : "(null)", eb,
            b ? b : "(null)");
    return false;
}

static inline int check_report(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed != 0;
}

#define CHECK(cond) check_at((cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ(a, b)                                                                             \
    check_eq_at((unsigned long long)(a), (unsigned long long)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_STREQ(a, b) check_streq_at((a), (b), __FILE__, __LINE__, #a, #b)

#endif
