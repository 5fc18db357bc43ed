/* guard_fault.h: the SIGSEGV/SIGBUS handler of page_guard and sample_guard.
 *
 * The handler (SA_SIGINFO | SA_ONSTACK) looks at every SIGSEGV and SIGBUS. A fault the
 * kernel raised (si_code > 0) at an address in guarded memory is ours: it is explained
 * (guard_report.h), and then the process aborts, so that the core shows the state; with
 * sample_guard_recover it goes on instead (the faulting page made accessible, its slots
 * retired, each slot reported once). Every other signal goes to the program's own handler,
 * untouched: its sa_mask, SA_NODEFER, SA_RESETHAND and SA_SIGINFO are honoured, SIG_IGN keeps
 * ignoring sent signals, and SIG_DFL (or SIG_IGN for a real fault) restores the default
 * action so that the fault, re-executed, kills the process as it would have.
 *
 * The program keeps its handler: libmalloc_debug.so interposes sigaction() and signal()
 * (signal_interpose.c), which record the program's SIGSEGV and SIGBUS handlers here instead of
 * replacing ours, and report them back to it, as sanitizers do; a handler installed another
 * way (the raw system call, sysv_signal, sigset) is noticed at the next guarded allocations
 * or the next interposed sigaction call for these signals (hs_md_guard_fault_check_installed)
 * and ours is put back in front of it. A fault on the pages of a live guarded block is the
 * program's too: those pages are readable and writable unless the program protected them.
 *
 * Stacks: the handler runs on the stack the kernel picks (the thread's own, or the program's
 * alternate stack when it set one): a fault in guarded memory is an ordinary heap access, not
 * a stack overflow, and the handler needs little there. The report itself (unwinding and
 * symbolizing, ~30 KiB) runs on a 256 KiB stack of the shim's own, mapped once at start, one
 * report at a time; so no thread needs an alternate stack of ours, whatever its stack size.
 * The abort happens back on the faulting thread's stack, under the signal frame.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARD_FAULT_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARD_FAULT_H

#include <signal.h>
#include <stdbool.h>

/* Maps the report stack and installs the handler for SIGSEGV and SIGBUS, keeping the
 * program's handlers to chain to. Returns false when sigaction failed. */
bool hs_md_guard_fault_init(void);

/* Puts the handler back in front of one installed since without the interposed sigaction. */
void hs_md_guard_fault_check_installed(void);

/* For the interposed sigaction: when sig is SIGSEGV or SIGBUS and the handler is installed,
 * stores the program's old handler in *old (if old), records act (if act) as the program's
 * handler, and returns true; returns false for any other call (the real sigaction does it). */
bool hs_md_guard_fault_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Takes / releases the lock of the program's recorded actions (fork handlers). */
void hs_md_guard_fault_lock(void);
void hs_md_guard_fault_unlock(void);

/* glibc's sigaction (the next definition after the shim's own), for the interposer. */
int hs_md_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#endif
