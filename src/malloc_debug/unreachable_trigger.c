/* unreachable_trigger.c: check_unreachable_on_signal (see unreachable_trigger.h). */
#define _GNU_SOURCE
#include "unreachable_trigger.h"

#include "debug_state.h"
#include "errno_text.h"
#include "format.h"
#include "log.h"
#include "signal_worker.h"

#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

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

/* On the worker thread: the detector's check (found once). */
static void run_check(void)
{
    static check_fn check;
    if (!check)
        check = find_detector();
    if (check)
        check();
}

void hs_md_unreachable_trigger_start(void)
{
    if (!(hs_md.cfg.options & HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL))
        return;
    const char *prog = hs_log_program_name();
    int sig = SIGRTMAX - 16;
    int err = hs_signal_worker_start(sig, "hs-unreachable", run_check);
    if (err != 0) {
        hs_log("%s: unable to set up signal %d to check for unreachable memory: %s", prog, sig,
               hs_errno_text(err));
        return;
    }
    if (hs_md.cfg.options & HS_OPT_VERBOSE)
        hs_log("%s: Run: 'kill -%d %d' to check for unreachable memory.", prog, sig, (int)getpid());
}
