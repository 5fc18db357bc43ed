/* signal_worker.c: see signal_worker.h. */
#define _GNU_SOURCE
#include "signal_worker.h"

#include "signals.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned g_requested, g_served; /* by the handler; by the thread */
static void (*g_work)(void);
static char g_name[16];

static void on_request(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    __atomic_add_fetch(&g_requested, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &g_requested, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *worker(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, g_name);
    for (;;) {
        unsigned requested = __atomic_load_n(&g_requested, __ATOMIC_ACQUIRE);
        if (requested == g_served) {
            syscall(SYS_futex, &g_requested, FUTEX_WAIT_PRIVATE, requested, NULL, NULL, 0);
            continue;
        }
        g_served = requested;
        g_work();
    }
    return NULL;
}

int hs_signal_worker_start(int sig, const char *thread_name, void (*work)(void))
{
    g_work = work;
    size_t i = 0;
    for (; thread_name[i] != '\0' && i < sizeof(g_name) - 1; i++)
        g_name[i] = thread_name[i];
    g_name[i] = '\0';
    /* The thread inherits the mask it is created with. */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, sig);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t thread;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&thread, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err != 0 ? err : hs_signal_install(sig, on_request);
}
