/* signal_interpose.c: sigaction() and signal() as libmalloc_debug.so exports them, so that a
 * program setting its own SIGSEGV or SIGBUS handler keeps the guarded-memory handler in front
 * of it (guard_fault.h): the program's handler is recorded and chained to, and the program
 * sees its own handler when it asks. Every other call goes straight to glibc's. Only the
 * preloaded library carries this file (not the copy of the shim inside libmemunreachable.so).
 */
#define _GNU_SOURCE
#include "guard_fault.h"

#include <signal.h>
#include <string.h>

#define HS_EXPORT __attribute__((visibility("default")))

/* glibc's signal() under its other exported name (the shim defines signal itself). */
extern sighandler_t hs_glibc_signal(int sig, sighandler_t handler) __asm__("bsd_signal");

HS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (hs_md_guard_fault_sigaction(sig, act, old))
        return 0;
    return hs_md_real_sigaction(sig, act, old);
}

/* For SIGSEGV and SIGBUS while the handler is installed: glibc's signal() semantics (BSD:
 * the handler stays, system calls restart, the signal is blocked while its handler runs),
 * built on the interposed sigaction as glibc builds it on its own. */
HS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction probe;
    if (handler == SIG_ERR || (sig != SIGSEGV && sig != SIGBUS) ||
        !hs_md_guard_fault_sigaction(sig, NULL, &probe))
        return hs_glibc_signal(sig, handler);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}
