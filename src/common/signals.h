/* signals.h: installing the tools' signal handlers (the SIGRTMAX-N requests). */
#ifndef HEAPSCOPE_COMMON_SIGNALS_H
#define HEAPSCOPE_COMMON_SIGNALS_H

#include <signal.h>

/* Installs handler for sig with SA_RESTART (the program's interrupted system calls go on),
 * SA_SIGINFO and SA_ONSTACK (a thread with an alternate stack uses it). Returns 0, or the
 * errno value of the failure. */
int hs_signal_install(int sig, void (*handler)(int, siginfo_t *, void *));

#endif
