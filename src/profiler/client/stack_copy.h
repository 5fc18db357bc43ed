/* stack_copy.h: the profiler client's copy of a thread's stack for a sample.
 *
 * A sample carries the registers (HS_UNWIND_CAPTURE_REGS, unwind_regs.h) and the bytes of the
 * stack from the stack pointer up to the end of the thread's stack (capped), which the daemon
 * unwinds (hs_unwind). The end of the stack is the end of the memory mapping that holds the
 * stack pointer: the main thread's [stack], another glibc thread's mmap'd stack. It is found
 * once per thread with /proc/self/maps (raw system calls, no malloc: this runs inside malloc)
 * and kept in thread-local storage; a stack pointer outside the cached range (an alternate
 * signal stack) is looked up again and not cached.
 *
 * Not all of that holds frames: the top of the main thread's stack holds the program's
 * arguments, environment and auxiliary vector (above __libc_stack_end, where _start found
 * them), and the top of another thread's mapping its TLS and thread descriptor (above the
 * thread's static TLS). Copying them costs a few KiB per sample and tells the unwinder
 * nothing, so hs_stack_copy stops below them.
 */
#ifndef HEAPSCOPE_PROFILER_STACK_COPY_H
#define HEAPSCOPE_PROFILER_STACK_COPY_H

#include "stack_gap.h"
#include "stack_hints.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The end (one past the last byte) of the stack holding sp, or 0 when sp is in no mapping. */
uintptr_t hs_stack_end(uintptr_t sp);

/* True when sp is on this thread's own stack, as hs_stack_end found it at the thread's first
 * sample; false before that, and on any other stack (an alternate signal stack, or the stack
 * of a clone(CLONE_VM) child running on this thread's storage). No system call. */
bool hs_stack_is_own(uintptr_t sp);

/* Where the frames of the stack holding sp end: hs_stack_end(sp), lowered to just above
 * __libc_stack_end on the main thread's stack and to this thread's static TLS on a thread
 * stack that holds it. 0 when sp is in no mapping. */
uintptr_t hs_stack_frames_end(uintptr_t sp);

/* Where a sample's copy of the stack holding sp ends: hs_stack_frames_end(sp), lowered to
 * hint (the daemon's note for this thread, stack_hints.h; 0 for none) when sp is on this
 * thread's own stack and hint lies above sp and below that bound. No system call once the
 * thread's stack is known. */
uintptr_t hs_stack_copy_end(uintptr_t sp, uintptr_t hint);

/* The gaps (stack_gap.h) of a copy of span bytes from sp: those of the n noted parts (the
 * daemon's, stack_hints.h, lowest first) that lie whole inside the span, above its first
 * word, 8-byte aligned, in order and apart; into out, their number returned. */
unsigned hs_stack_copy_gaps(uintptr_t sp, size_t span, const struct hs_stack_range *noted,
                            unsigned n, struct hs_stack_gap out[HS_STACK_GAPS]);

/* Copies the span bytes from sp to dst without the n gaps (valid for the span): span minus
 * the gaps' bytes land in dst. */
void hs_stack_copy_without_gaps(void *dst, uintptr_t sp, size_t span,
                                const struct hs_stack_gap *gaps, unsigned n);

/* Copies the stack from sp up to where its frames end, at most cap bytes, to dst. Returns the
 * bytes copied (0 when the stack could not be found). Async-signal-safe. */
size_t hs_stack_copy(uintptr_t sp, void *dst, size_t cap);

#endif
