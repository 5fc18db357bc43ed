/* fault_context.h: what the signal context of a memory fault says: the stack of the
 * faulting access and whether it read or wrote.
 *
 * The stack is unwound from the registers the kernel saved (libunwind's unw_init_local2 with
 * UNW_INIT_SIGNAL_FRAME), not from the handler's own stack, so it works on any stack the
 * handler runs on. Frame 0 is the faulting instruction's exact pc (read from a register);
 * the frames after it are call sites (return address - 1), as hs_backtrace_capture stores
 * them, except a frame after a signal trampoline, which is exact too.
 *
 * Read or write: on x86_64 the page-fault error code the kernel saves (REG_ERR, bit 1 set
 * for a write; only when REG_TRAPNO is 14, a page fault); on aarch64 the ESR record in the
 * signal frame (a data abort's WnR bit). Elsewhere, and for other faults, it is unknown.
 *
 * The unwind goes through the capture gate (capture_gate.h) like every other capture: it takes
 * libunwind's locks, which a fork in another thread must not copy held; while a fork is in
 * progress it waits for it, and where the gate refuses (captures off in this process, or a
 * fault that interrupted a capture of its own thread during a fork) the stack is the pc alone.
 * Async-signal-safe. No allocation.
 */
#ifndef HEAPSCOPE_COMMON_FAULT_CONTEXT_H
#define HEAPSCOPE_COMMON_FAULT_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

enum hs_fault_access {
    HS_FAULT_UNKNOWN = -1,
    HS_FAULT_READ = 0,
    HS_FAULT_WRITE = 1,
};

/* Read or write, from the ucontext_t a SA_SIGINFO handler got as its third argument. */
int hs_fault_access(const void *ucontext);

/* The interrupted pc of the context (0 when unknown). */
uintptr_t hs_fault_pc(const void *ucontext);

/* Stores up to max frames of the interrupted thread's stack into frames, innermost first,
 * and returns how many (at least the pc, when max > 0 and the pc is known). */
size_t hs_fault_backtrace(void *ucontext, uintptr_t *frames, size_t max);

#endif
