/* stack_copy.h: the profiler client's copy of a thread's stack for a sample.
 *
 * A sample carries the registers (HS_UNWIND_CAPTURE_REGS, unwinder.h) and the bytes of the
 * stack from the stack pointer up to the end of the thread's stack (capped), which the daemon
 * unwinds (hs_unwind). The end of the stack is the end of the memory mapping that holds the
 * stack pointer: the main thread's [stack], another glibc thread's mmap'd stack (whose top
 * also holds its TLS and thread descriptor: a few KiB more, harmless). It is found once per
 * thread with /proc/self/maps (raw system calls, no malloc: this runs inside malloc) and kept
 * in thread-local storage; a stack pointer outside the cached range (an alternate signal
 * stack) is looked up again and not cached.
 */
#ifndef HEAPSCOPE_PROFILER_STACK_COPY_H
#define HEAPSCOPE_PROFILER_STACK_COPY_H

#include <stddef.h>
#include <stdint.h>

/* The end (one past the last byte) of the stack holding sp, or 0 when sp is in no mapping. */
uintptr_t hs_stack_end(uintptr_t sp);

/* Copies the stack from sp up to its end, at most cap bytes, to dst. Returns the bytes copied
 * (0 when the stack could not be found). Async-signal-safe. */
size_t hs_stack_copy(uintptr_t sp, void *dst, size_t cap);

#endif
