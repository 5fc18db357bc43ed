/* unreachable_trigger.c: check_unreachable_on_signal (see unreachable_trigger.h). */
#define _GNU_SOURCE
#include "unreachable_trigger.h"

#include "debug_state.h"
#include "errno_text.h"
#include "format.h"
#include "log.h"
#include "signals.h"

#include <dlfcn.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Requests made (by the handler) and served (by the thread). */
static unsigned g_requested, g_served;

static void on_check_unreachable(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    __atomic_add_fetch(&g_requested, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &g_requested, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

typedef void (*check_fn)(void);

/* The detector: linked into the program (or preloaded), else loaded from our directory. */
static check_fn find_detector(void)
{
    check_fn fn = (check_fn)dlsym(RTLD_DEFAULT, "heapscope_unreachable_check");
    if (fn)
        return fn;
    const char *slash = strrchr(hs_md.self_path, '/');
    if (!slash)
        return NULL;
    char path[PATH_MAX];
    hs_format(path, sizeof(path), "%.*s/libmemunreachable.so", (int)(slash - hs_md.self_path),
              hs_md.self_path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        hs_log("%s: cannot load %s for check_unreachable_on_signal", hs_log_program_name(), path);
        return NULL;
    }
    return (check_fn)dlsym(lib, "heapscope_unreachable_check");
}

static void *watcher(void *arg)
{
    (void)arg;
    /* The program's signals go to its own threads, not to this one. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    prctl(PR_SET_NAME, "hs-unreachable");
    check_fn check = NULL;
    for (;;) {
        unsigned requested = __atomic_load_n(&g_requested, __ATOMIC_ACQUIRE);
        if (requested == g_served) {
            syscall(SYS_futex, &g_requested, FUTEX_WAIT_PRIVATE, requested, NULL, NULL, 0);
            continue;
        }
        g_served = requested; /* requests that came in while checking are served by one run */
        if (!check)
            check = find_detector();
        if (check)
            check();
    }
    return NULL;
}

void hs_md_unreachable_trigger_start(void)
{
    if (!(hs_md.cfg.options & HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL))
        return;
    const char *prog = hs_log_program_name();
    int sig = SIGRTMAX - 16;
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&thread, &attr, watcher, NULL);
    pthread_attr_destroy(&attr);
    if (err == 0)
        err = hs_signal_install(sig, on_check_unreachable);
    if (err != 0) {
        hs_log("%s: unable to set up signal %d to check for unreachable memory: %s", prog, sig,
               hs_errno_text(err));
        return;
    }
    if (hs_md.cfg.options & HS_OPT_VERBOSE)
        hs_log("%s: Run: 'kill -%d %d' to check for unreachable memory.", prog, sig, (int)getpid());
}
