/* unreachable_trigger.h: check_unreachable_on_signal, the shim's side.
 *
 * SIGRTMAX-16 (48) asks for an unreachable-memory check. The handler only wakes a small
 * thread the shim starts for this (so the check runs even in a program that is idle, never
 * inside the handler); the thread runs heapscope_unreachable_check() from
 * libmemunreachable.so (linked into the program, or loaded from the shim's own directory),
 * which logs the report and leaves it in /tmp/heapscope_unreachable.<pid>.txt for
 * `heapscope leaks -p PID`.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_UNREACHABLE_TRIGGER_H
#define HEAPSCOPE_MALLOC_DEBUG_UNREACHABLE_TRIGGER_H

/* Installs the signal handler and starts the thread; called once libc is fully up (the
 * library constructor). Logs the "Run: 'kill -48 PID' ..." line with verbose. */
void hs_md_unreachable_trigger_start(void);

#endif
