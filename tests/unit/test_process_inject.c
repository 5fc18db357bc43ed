/* test_process_inject.c: the ptrace injector (src/cli/process_inject.c) on child processes.
 *
 * Children: one idle in nanosleep, one hammering malloc/free in two threads (mostly inside
 * libc, so the injector must step to a safe point), one that exits; each must answer the
 * same afterwards as without the injection. One whose malloc is a preloaded replacement that
 * holds a lock in every call, its only thread nearly always in it (inject_busy_alloc with
 * inject_allocator.so): the injector must step the thread out of that object too, or
 * dlopen's malloc waits for the lock the stopped thread holds, forever. Also the refusal
 * texts and the system-call classification.
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf_symbols.h"
#include "process_inject.h"
#include "proc_maps.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *g_probe;
static const char *g_allocator, *g_busy_alloc; /* inject_allocator.so, inject_busy_alloc */

/* A child that computes a known value in `threads` threads (busy in malloc when busy) or
 * sleeps, and reports it on a pipe when asked (one byte in). */
static uint64_t work(int busy, unsigned rounds)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < rounds; i++) {
        if (busy) {
            size_t n = 16 + (i * 37) % 2000;
            unsigned char *p = malloc(n);
            p[n - 1] = (unsigned char)i;
            sum = sum * 31 + p[n - 1] + n;
            free(p);
        } else {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            sum = sum * 31 + i;
        }
    }
    return sum;
}

static void *busy_thread(void *arg)
{
    (void)arg;
    for (;;)
        work(1, 1000000);
    return NULL;
}

static pid_t start_child(int busy, int *ask, int *answer)
{
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        close(to_child[1]);
        close(from_child[0]);
        if (busy) {
            pthread_t t;
            pthread_create(&t, NULL, busy_thread, NULL);
        }
        char c;
        while (read(to_child[0], &c, 1) == 1) {
            uint64_t v = work(busy, busy ? 200000 : 50);
            if (write(from_child[1], &v, sizeof(v)) != sizeof(v))
                _exit(3);
        }
        _exit(0);
    }
    close(to_child[0]);
    close(from_child[1]);
    *ask = to_child[1];
    *answer = from_child[0];
    return pid;
}

static uint64_t ask_child(int ask, int answer)
{
    uint64_t v = 0;
    if (write(ask, "x", 1) != 1 || read(answer, &v, sizeof(v)) != sizeof(v))
        return 0;
    return v;
}

static void test_injection(int busy)
{
    check_context(busy ? "busy child" : "idle child");
    int ask, answer;
    pid_t pid = start_child(busy, &ask, &answer);
    uint64_t expected = ask_child(ask, answer);
    CHECK(expected != 0);
    struct hs_inject_options opt = {g_probe, "inject_probe_init", false, 5000};
    struct hs_inject_result res;
    for (int round = 0; round < 3; round++) {
        CHECK_EQ(hs_inject_library("test", pid, &opt, &res), 0);
        CHECK_EQ(res.init_status, 42 + round); /* the same library, loaded once */
        CHECK(res.tid > 0);
        CHECK(res.pause_ms >= 0 && res.pause_ms < 5000);
        CHECK_STREQ(res.loaded_path, g_probe);
        CHECK_EQ(ask_child(ask, answer), expected); /* unharmed */
        printf("%s: thread %d paused %.2f ms, %lu instructions stepped, %u threads tried\n",
               busy ? "busy" : "idle", (int)res.tid, res.pause_ms, res.steps, res.threads_tried);
    }
    char probe_in_child = 0;
    FILE *maps = NULL;
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    maps = fopen(path, "re");
    while (maps && fgets(line, sizeof(line), maps))
        if (strstr(line, "inject_probe"))
            probe_in_child = 1;
    if (maps)
        fclose(maps);
    CHECK(probe_in_child);
    close(ask);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(answer);
}

/* Every thread busy in malloc and free: the injector must single-step one out of libc. */
static void test_injection_all_busy(void)
{
    check_context("every thread busy");
    int from_child[2];
    if (pipe(from_child) != 0)
        abort();
    const unsigned rounds = 3000000;
    pid_t pid = fork();
    if (pid == 0) {
        close(from_child[0]);
        pthread_t t;
        pthread_create(&t, NULL, busy_thread, NULL);
        uint64_t v = work(1, rounds);
        _exit(write(from_child[1], &v, sizeof(v)) == sizeof(v) ? 0 : 3);
    }
    close(from_child[1]);
    struct timespec settle = {0, 20 * 1000 * 1000};
    nanosleep(&settle, NULL);
    struct hs_inject_options opt = {g_probe, "inject_probe_init", false, 5000};
    struct hs_inject_result res;
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), 0);
    CHECK_EQ(res.init_status, 42);
    printf("all busy: thread %d paused %.2f ms, %lu instructions stepped, %u threads tried\n",
           (int)res.tid, res.pause_ms, res.steps, res.threads_tried);
    uint64_t v = 0;
    CHECK(read(from_child[0], &v, sizeof(v)) == sizeof(v));
    CHECK_EQ(v, work(1, rounds)); /* the same result as without the injection */
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(from_child[0]);
}

/* The sanitizers' runtime must be first in the list of objects, before any preload: the
 * allocator case runs only without them. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TEST_PRELOADED_ALLOCATOR 1

/* Reads fd until n '.' more came, for at most timeout_ms; true when they did. */
static bool read_dots(int fd, int n, int timeout_ms)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = timeout_ms -
                    ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
        struct pollfd pfd = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return false;
        char buf[256];
        ssize_t got = read(fd, buf, sizeof(buf));
        if (got <= 0)
            return false;
        n -= (int)got;
        if (n <= 0)
            return true;
    }
}

#endif

/* The only thread inside a preloaded allocator that holds its lock in each call. */
static void test_injection_allocator_replaced(void)
{
    check_context("allocator replaced, the thread in it");
#ifdef TEST_PRELOADED_ALLOCATOR
    int out[2];
    if (pipe(out) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        setenv("LD_PRELOAD", g_allocator, 1);
        execl(g_busy_alloc, g_busy_alloc, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    CHECK(read_dots(out[0], 1, 10000)); /* running, with the allocator */
    /* Stepping out of the allocator takes about 1,500 single steps: room for a loaded machine. */
    struct hs_inject_options opt = {g_probe, "inject_probe_init", false, 20000};
    struct hs_inject_result res;
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), 0);
    CHECK_EQ(res.init_status, 42);
    printf("allocator replaced: thread %d paused %.2f ms, %lu instructions stepped, %u threads "
           "tried\n",
           (int)res.tid, res.pause_ms, res.steps, res.threads_tried);
    /* Still making progress afterwards (what was written meanwhile is read first). */
    char buf[4096];
    struct pollfd pfd = {out[0], POLLIN, 0};
    while (poll(&pfd, 1, 0) > 0 && read(out[0], buf, sizeof(buf)) > 0)
        ;
    CHECK(read_dots(out[0], 3, 10000));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out[0]);
#endif
    check_context(NULL);
}

static void test_missing_library_and_function(void)
{
    check_context("bad library");
    int ask, answer;
    pid_t pid = start_child(0, &ask, &answer);
    uint64_t expected = ask_child(ask, answer);
    struct hs_inject_options opt = {"/nonexistent/libnothing.so", NULL, false, 5000};
    struct hs_inject_result res;
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), (unsigned long long)-1);
    opt.library = "/proc/self/exe"; /* this test: an executable, which dlopen refuses */
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), (unsigned long long)-1);
    opt.library = g_probe;
    opt.init_function = "no_such_function";
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), (unsigned long long)-1);
    CHECK_EQ(ask_child(ask, answer), expected);
    close(ask);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(answer);
    check_context("no process");
    CHECK_EQ(hs_inject_library("test", pid, &opt, &res), (unsigned long long)-1);
}

static void test_texts(void)
{
    check_context("refusal texts");
    CHECK(strstr(hs_inject_ptrace_refusal(EPERM, 3, true), "ptrace_scope is 3") != NULL);
    CHECK(strstr(hs_inject_ptrace_refusal(EPERM, 2, false), "ptrace_scope is 2") != NULL);
    CHECK(strstr(hs_inject_ptrace_refusal(EPERM, 1, false), "ptrace_scope is 1") != NULL);
    CHECK(strstr(hs_inject_ptrace_refusal(EPERM, 1, true), "ptrace_scope") == NULL);
    CHECK(strstr(hs_inject_ptrace_refusal(EPERM, -1, false), "not dumpable") != NULL);
    CHECK(strstr(hs_inject_ptrace_refusal(ESRCH, -1, false), "exited") != NULL);
    check_context("safe system calls");
    CHECK(hs_inject_syscall_is_safe(SYS_nanosleep, false, false));
    CHECK(hs_inject_syscall_is_safe(SYS_epoll_wait, false, false));
    CHECK(hs_inject_syscall_is_safe(SYS_read, false, false));
    CHECK(hs_inject_syscall_is_safe(SYS_futex, false, false));
    CHECK(!hs_inject_syscall_is_safe(SYS_futex, true, false));
    CHECK(!hs_inject_syscall_is_safe(SYS_futex, false, true));
    CHECK(!hs_inject_syscall_is_safe(SYS_mmap, false, false));
    CHECK(!hs_inject_syscall_is_safe(SYS_brk, false, false));
    CHECK(!hs_inject_syscall_is_safe(SYS_openat, false, false));
}

static void test_find_function(void)
{
    check_context("hs_elf_find_function");
    Dl_info info;
    void *dlopen_here = dlsym(RTLD_DEFAULT, "dlopen");
    CHECK(dladdr(dlopen_here, &info) != 0);
    struct hs_elf elf;
    CHECK(hs_elf_open(&elf, info.dli_fname));
    uintptr_t vaddr = 0;
    CHECK(hs_elf_find_function(&elf, "dlopen", &vaddr));
    CHECK_EQ((uintptr_t)info.dli_fbase + vaddr, (uintptr_t)dlopen_here);
    CHECK(!hs_elf_find_function(&elf, "no_such_function_here", &vaddr));
    hs_elf_close(&elf);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_process_inject PATH/inject_probe.so "
                        "PATH/inject_allocator.so PATH/inject_busy_alloc\n");
        return 2;
    }
    g_probe = argv[1];
    g_allocator = argv[2];
    g_busy_alloc = argv[3];
    test_texts();
    test_find_function();
    test_injection(0);
    test_injection(1);
    test_injection_all_busy();
    test_injection_allocator_replaced();
    test_missing_library_and_function();
    return check_report();
}
