/* test_hs_assert.c: hs_assert (src/common/hs_assert.h) in a child process: a failed check
 * prints "<program>[<pid>] heapscope: assertion failed: <cond> at <file>:<line> in <func>()"
 * on stderr, after the lines of the report the thread had gathered, and dies of SIGABRT; a
 * check failing while the failure is logged writes a fixed line instead of recursing; a
 * check that holds costs nothing visible. Built twice: at level 2 (every check on) and at
 * level 0 (test_hs_assert_off: no check evaluated, nothing aborts).
 */
#define _GNU_SOURCE
#include "check.h"

/* This program's level replaces the build's (HS_TEST_ASSERT_LEVEL, from its CMake file). */
#undef HEAPSCOPE_ASSERT_LEVEL
#define HEAPSCOPE_ASSERT_LEVEL HS_TEST_ASSERT_LEVEL
#include "hs_assert.h"
#include "log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_evaluated;

static int counted(int v)
{
    g_evaluated++;
    return v;
}

/* The line of the failing check, set by the child in memory shared with the parent. */
static int *g_shared_line;
#define g_fail_line (*g_shared_line)

static void fail_plain(void)
{
    int value = 2;
    g_fail_line = __LINE__ + 1;
    hs_assert(value == 1);
}

__attribute__((unused)) static void fail_in_report(void)
{
    hs_log_begin();
    hs_log("first line of the report");
    hs_log("second line of the report");
    g_fail_line = __LINE__ + 1;
    hs_assert(counted(0));
    hs_log_end();
}

static void fail_expensive(void)
{
    g_fail_line = __LINE__ + 1;
    hs_assert_expensive(counted(0) == 7);
}

/* A sink whose own check fails: the failure path logs through it, so that second failure
 * happens while the first is being reported. */
static void failing_sink(const char *line, size_t len, void *ctx)
{
    (void)line;
    (void)ctx;
    hs_assert(len == 0);
}

__attribute__((unused)) static void fail_recursively(void)
{
    hs_log_set_sink(failing_sink, NULL);
    hs_assert(counted(0));
}

struct outcome {
    int status;
    char err[4096];
};

/* Runs fn in a child with stderr on a pipe; returns how it ended and what it wrote. */
static struct outcome run_child(void (*fn)(void))
{
    struct outcome out = {0};
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        signal(SIGABRT, SIG_DFL);
        hs_log_init("test");
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out.err + len, sizeof(out.err) - 1 - len)) > 0)
        len += (size_t)n;
    out.err[len] = '\0';
    close(fds[0]);
    waitpid(pid, &out.status, 0);
    return out;
}

__attribute__((unused)) static bool aborted(const struct outcome *o)
{
    return WIFSIGNALED(o->status) && WTERMSIG(o->status) == SIGABRT;
}

__attribute__((unused)) static bool exited_ok(const struct outcome *o)
{
    return WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0;
}

__attribute__((unused)) static void expect_line(const struct outcome *o, const char *cond,
                                                const char *func)
{
    char want[512];
    snprintf(want, sizeof(want),
             "] heapscope: assertion failed: %s at test_hs_assert.c:%d in %s()\n", cond,
             g_fail_line, func);
    CHECK(strstr(o->err, want) != NULL);
    CHECK(strncmp(o->err, "test_hs_assert", strlen("test_hs_assert")) == 0);
    if (!strstr(o->err, want))
        fprintf(stderr, "    wanted \"%s\" in:\n%s", want, o->err);
}

#if HEAPSCOPE_ASSERT_LEVEL >= 2
static void test_failures(void)
{
    check_context("a plain failed check");
    struct outcome o = run_child(fail_plain);
    CHECK(aborted(&o));
    expect_line(&o, "value == 1", "fail_plain");

    check_context("a failed check inside a report: the report's lines come first");
    o = run_child(fail_in_report);
    CHECK(aborted(&o));
    expect_line(&o, "counted(0)", "fail_in_report");
    const char *first = strstr(o.err, "first line of the report");
    const char *second = strstr(o.err, "second line of the report");
    const char *failed = strstr(o.err, "assertion failed");
    CHECK(first && second && failed && first < second && second < failed);

    check_context("a failed expensive check at level 2");
    o = run_child(fail_expensive);
    CHECK(aborted(&o));
    expect_line(&o, "counted(0) == 7", "fail_expensive");

    check_context("a check failing while a failure is logged");
    o = run_child(fail_recursively);
    CHECK(aborted(&o));
    CHECK(strstr(o.err, "heapscope: assertion failed while reporting a failed assertion\n") !=
          NULL);
}
#else
static void test_checks_off(void)
{
    check_context("level 0: no condition is evaluated and nothing aborts");
    struct outcome o = run_child(fail_plain);
    CHECK(exited_ok(&o));
    CHECK_STREQ(o.err, "");
    o = run_child(fail_expensive);
    CHECK(exited_ok(&o));
    g_evaluated = 0;
    hs_assert(counted(0));
    hs_assert_expensive(counted(0));
    CHECK_EQ(g_evaluated, 0);
    CHECK_EQ(HS_ASSERT_EXPENSIVE, 0);
}
#endif

static void test_passing_checks(void)
{
    check_context("checks that hold: evaluated once each at level >= 1, silent");
    g_evaluated = 0;
    hs_assert(counted(1));
    hs_assert_expensive(counted(1) == 1);
    CHECK_EQ(g_evaluated, HEAPSCOPE_ASSERT_LEVEL >= 2 ? 2 : HEAPSCOPE_ASSERT_LEVEL);
}

int main(void)
{
    g_shared_line = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_shared_line == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
#if HEAPSCOPE_ASSERT_LEVEL >= 2
    test_failures();
#else
    test_checks_off();
#endif
    test_passing_checks();
    return check_report();
}
