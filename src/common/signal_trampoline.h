/* signal_trampoline.h: recognising, in a captured stack, the frame where a signal handler
 * returns, so that the frame after it is kept exact.
 *
 * The kernel makes a handler return into its sa_restorer, a trampoline that only calls
 * rt_sigreturn ("mov $15, %rax; syscall" on x86_64); glibc's is __restore_rt in libc.so.6,
 * the restorer of every handler installed through glibc's sigaction and signal. An unwinder
 * goes from that frame to the interrupted one through the saved registers: the pc it finds
 * there was read from a register, the instruction the signal interrupted, not a return
 * address, so it must not be turned into a call site (pc - 1) like the other frames.
 *
 * Only glibc's trampoline is recognised: its code is read only inside libc's executable
 * segment (found once with dl_iterate_phdr), because a frame of a captured stack can be
 * garbage, and reading code at an arbitrary address could fault. A restorer elsewhere (a
 * program's own, installed with the raw system call) is not recognised, and the frame after
 * it is stored as a call site.
 *
 * Threading and signals: thread-safe. The first call looks libc up with dl_iterate_phdr (no
 * malloc, but the dynamic loader's lock, as libunwind's own lookups); the later ones only
 * compare addresses and, for a pc in libc, 9 bytes of its code.
 */
#ifndef HEAPSCOPE_COMMON_SIGNAL_TRAMPOLINE_H
#define HEAPSCOPE_COMMON_SIGNAL_TRAMPOLINE_H

#include <stdbool.h>
#include <stdint.h>

/* True when pc (a frame as an unwinder reports it: the address the frame above returns to)
 * is the start of glibc's signal trampoline, i.e. the next frame outwards was interrupted by
 * a signal and its pc is exact. */
bool hs_is_signal_trampoline(uintptr_t pc);

/* The address of a captured frame as stored: a return address becomes its call site (the
 * address minus 1, inside the call instruction, as bionic and Go store frames), unless the
 * frame was reached through a signal trampoline (after_trampoline), whose pc is exact. 0
 * stays 0. */
static inline uintptr_t hs_call_site(uintptr_t pc, bool after_trampoline)
{
    return after_trampoline || pc == 0 ? pc : pc - 1;
}

#endif
