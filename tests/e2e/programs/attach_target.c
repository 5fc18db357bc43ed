/* attach_target.c: processes that `heapscope profile -p` must refuse to load its client into,
 * or load it into only when asked to.
 *
 *   attach_target sleep SECONDS    prints "ready pid=P" and sleeps (built twice: dynamically
 *                                  linked, and as attach_target_static, statically linked)
 *   attach_target seccomp SECONDS  installs a seccomp filter that allows every system call,
 *                                  then allocates in a loop like a server for SECONDS
 *   attach_target idle SECONDS     prints "ready pid=P" and sleeps without allocating (a
 *                                  quiet service: nothing but a signal wakes it)
 *   attach_target traced SECONDS   a child of its own traces it (as a leak check's collector
 *                                  or a crash handler does), passing its signals on; prints
 *                                  "ready pid=P" once traced, then sleeps
 *   attach_target stuck SECONDS    prints "ready pid=P", then its two threads deadlock on
 *                                  stdout's and stderr's locks (the C library's own data):
 *                                  no thread ever reaches a point where a library may be
 *                                  loaded; exits after SECONDS all the same (alarm)
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int install_allow_all_filter(void)
{
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {1, &allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

__attribute__((noinline)) static void *site_target(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *lock_stderr_then_stdout(void *arg)
{
    (void)arg;
    flockfile(stderr);
    flockfile(stdout); /* held by main: waits for good */
    return NULL;
}

/* The child: traces its parent and passes every signal on, until the parent is gone. */
static int trace_parent(pid_t parent)
{
    if (ptrace(PTRACE_SEIZE, parent, NULL, NULL) != 0)
        return 1;
    for (;;) {
        int status;
        if (waitpid(parent, &status, __WALL) != parent || !WIFSTOPPED(status))
            return 0;
        int sig = WSTOPSIG(status);
        ptrace(PTRACE_CONT, parent, NULL, (void *)(long)((status >> 16) || sig == SIGTRAP ? 0 : sig));
    }
}

static int traced(int seconds)
{
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: a child may trace us */
    pid_t parent = getpid(), child = fork();
    if (child < 0)
        return 1;
    if (child == 0)
        _exit(trace_parent(parent));
    for (int i = 0; i < 500; i++) { /* until the child traces us */
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)parent);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *t = strstr(buf, "TracerPid:");
        if (t && atoi(t + 10) == (int)child)
            break;
        usleep(10000);
    }
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    sleep((unsigned)seconds);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}

static int stuck(int seconds)
{
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    alarm((unsigned)seconds); /* the default action ends the deadlock */
    flockfile(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, lock_stderr_then_stdout, NULL) != 0)
        return 1;
    while (ftrylockfile(stderr) == 0) { /* until the thread holds it */
        funlockfile(stderr);
        sched_yield();
    }
    flockfile(stderr); /* held by the thread: waits for good */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "sleep") != 0 && strcmp(argv[1], "seccomp") != 0 &&
                      strcmp(argv[1], "idle") != 0 && strcmp(argv[1], "stuck") != 0 &&
                      strcmp(argv[1], "traced") != 0)) {
        fprintf(stderr, "usage: attach_target sleep|seccomp|idle|stuck|traced SECONDS\n");
        return 2;
    }
    int seconds = atoi(argv[2]);
    if (strcmp(argv[1], "stuck") == 0)
        return stuck(seconds);
    if (strcmp(argv[1], "traced") == 0)
        return traced(seconds);
    if (strcmp(argv[1], "idle") == 0) {
        printf("ready pid=%d\n", (int)getpid());
        fflush(stdout);
        /* Woken by signals (the profiling signal among them): sleeps out the rest each time. */
        struct timespec left = {seconds, 0};
        while (nanosleep(&left, &left) != 0 && errno == EINTR)
            ;
        printf("done idle\n");
        return 0;
    }
    if (strcmp(argv[1], "seccomp") == 0 && install_allow_all_filter() != 0) {
        perror("seccomp");
        return 1;
    }
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    unsigned long sum = 0;
    for (int ms = 0; ms < seconds * 1000; ms += 10) {
        void *p = site_target(100 + (size_t)(ms % 900));
        sum += (unsigned long)(p != NULL);
        free(p);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("done %lu\n", sum);
    return 0;
}
