/* signal_worker.h: a signal that asks a thread of ours to do some work.
 *
 * The handler only counts the request and wakes the thread (a futex), so the work, which may
 * allocate, take locks or fork, never runs inside a signal handler, and an idle process
 * answers too. Requests that arrive while the work runs are served by one more run. The
 * thread blocks every signal but sig: the program's own signals never land on it, and sig can
 * always be delivered. One worker per copy of this code (each heapscope library links its
 * own).
 */
#ifndef HEAPSCOPE_COMMON_SIGNAL_WORKER_H
#define HEAPSCOPE_COMMON_SIGNAL_WORKER_H

/* Starts the thread (named thread_name), then installs the handler for sig (hs_signal_install).
 * Returns 0, or the errno value of the failure (a thread started before a failed install stays
 * idle). Call from a normal context, once. */
int hs_signal_worker_start(int sig, const char *thread_name, void (*work)(void));

#endif
