/* heapscope/memunreachable_injected.h: libmemunreachable.so loaded into a process that was
 * started without heapscope (nothing preloaded, glibc's malloc, no allocation tracking).
 *
 * An injector (heapscope leaks -p, or any program) makes one thread of the target, stopped at
 * a safe point, call dlopen("/path/to/libmemunreachable.so", RTLD_NOW) and then
 * heapscope_unreachable_injected_init(). From then on the process answers the check signal
 * (SIGRTMAX-16) like a process started under `heapscope leaks`: it writes the report to
 * /tmp/heapscope_unreachable.<pid>.txt. The check walks glibc's heap itself, so the report has
 * no allocation backtraces and groups the leaks by size.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_INJECTED_H
#define HEAPSCOPE_MEMUNREACHABLE_INJECTED_H

#ifdef __cplusplus
extern "C" {
#endif

/* What heapscope_unreachable_injected_init returns. */
enum heapscope_injected_error {
    HEAPSCOPE_INJECTED_OK = 0,
    HEAPSCOPE_INJECTED_NOT_GLIBC_MALLOC = 1, /* malloc is another allocator's */
    HEAPSCOPE_INJECTED_HEAPSCOPE_MALLOC = 2, /* malloc is heapscope's own shim already */
    HEAPSCOPE_INJECTED_OLD_GLIBC = 3,        /* glibc older than 2.32 */
    HEAPSCOPE_INJECTED_SIGNAL_IN_USE = 4,    /* the program handles SIGRTMAX-16 itself */
    HEAPSCOPE_INJECTED_SETUP_FAILED = 5,     /* no thread or signal handler could be set up */
};

/* Sets the process up for checks without preloading: checks that malloc is glibc's, installs
 * the SIGRTMAX-16 handler and starts the small thread that runs the checks. Call it once the
 * library is loaded, from a thread that holds no lock (it calls dlsym, sigaction and
 * pthread_create). Returns HEAPSCOPE_INJECTED_OK (also on a second call, which does nothing)
 * or one of the codes above; the process is left unchanged on error. */
int heapscope_unreachable_injected_init(void);

/* The message for a code of heapscope_unreachable_injected_init, for "heapscope leaks: "
 * + message (no trailing period or newline). */
static inline const char *heapscope_injected_error_text(int code)
{
    switch (code) {
    case HEAPSCOPE_INJECTED_OK:
        return "ok";
    case HEAPSCOPE_INJECTED_NOT_GLIBC_MALLOC:
        return "the process does not use glibc's malloc (another allocator is linked or "
               "preloaded); without preloading, only glibc's malloc can be checked";
    case HEAPSCOPE_INJECTED_HEAPSCOPE_MALLOC:
        return "the process already uses heapscope's malloc debug; start it with "
               "'heapscope leaks -- PROGRAM' (or the option check_unreachable_on_signal) to "
               "check it";
    case HEAPSCOPE_INJECTED_OLD_GLIBC:
        return "the process's glibc is older than 2.32, whose heap layout the check does not "
               "know";
    case HEAPSCOPE_INJECTED_SIGNAL_IN_USE:
        return "the program handles the check signal (SIGRTMAX-16) itself, so it cannot be "
               "checked without being started under heapscope";
    case HEAPSCOPE_INJECTED_SETUP_FAILED:
        return "could not start the check thread or install the signal handler in the process";
    default:
        return "unknown error from the injected library";
    }
}

#ifdef __cplusplus
}
#endif

#endif
