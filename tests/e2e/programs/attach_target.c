/* attach_target.c: processes that `heapscope profile -p` must refuse to load its client into,
 * or load it into only when asked to.
 *
 *   attach_target sleep SECONDS    prints "ready pid=P" and sleeps (built twice: dynamically
 *                                  linked, and as attach_target_static, statically linked)
 *   attach_target seccomp SECONDS  installs a seccomp filter that allows every system call,
 *                                  then allocates in a loop like a server for SECONDS
 *   attach_target idle SECONDS     prints "ready pid=P" and sleeps without allocating (a
 *                                  quiet service: nothing but a signal wakes it)
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "sleep") != 0 && strcmp(argv[1], "seccomp") != 0 &&
                      strcmp(argv[1], "idle") != 0)) {
        fprintf(stderr, "usage: attach_target sleep|seccomp|idle SECONDS\n");
        return 2;
    }
    int seconds = atoi(argv[2]);
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
