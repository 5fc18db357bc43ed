/* unwind_regs.h: the registers a sample carries (part of the profiler's wire format).
 *
 * The client captures them at the sampled allocation (HS_UNWIND_CAPTURE_REGS) into its MALLOC
 * record (records.h), beside the copy of its stack; the daemon's unwinder (daemon/unwinder.h)
 * starts from them. Plain data and one asm statement: no dependency on either side.
 */
#ifndef HEAPSCOPE_PROFILER_UNWIND_REGS_H
#define HEAPSCOPE_PROFILER_UNWIND_REGS_H

#include <stdint.h>

/* DWARF register numbers of x86_64 (System V psABI), which index hs_unwind_regs.dwarf. */
enum {
    HS_UNWIND_RAX = 0,
    HS_UNWIND_RDX = 1,
    HS_UNWIND_RCX = 2,
    HS_UNWIND_RBX = 3,
    HS_UNWIND_RSI = 4,
    HS_UNWIND_RDI = 5,
    HS_UNWIND_RBP = 6,
    HS_UNWIND_RSP = 7,
    HS_UNWIND_R8 = 8,
    HS_UNWIND_R9 = 9,
    HS_UNWIND_R10 = 10,
    HS_UNWIND_R11 = 11,
    HS_UNWIND_R12 = 12,
    HS_UNWIND_R13 = 13,
    HS_UNWIND_R14 = 14,
    HS_UNWIND_R15 = 15,
    HS_UNWIND_RIP = 16,
    HS_UNWIND_NREGS = 17,
};

/* The registers of the thread at the capture point, in DWARF order (so that .dwarf[n] is
 * DWARF register n). Unwinding from a call site needs rip, rsp and the callee-saved registers
 * (rbx, rbp, r12-r15); the others matter only when the innermost frame's CFA is based on
 * them, and may be 0 when not captured. Laid out for HS_UNWIND_CAPTURE_REGS (136 bytes). */
struct hs_unwind_regs {
    union {
        struct {
            uint64_t rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp;
            uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
            uint64_t rip;
        };
        uint64_t dwarf[HS_UNWIND_NREGS];
    };
};

/* Stores the registers at this point of the calling function into *(regs_ptr), with rip the
 * address of an instruction inside the statement (so the capture point is in the caller, and
 * its CFI describes the stack that rsp points to). Copy the stack from regs.rsp after it; the
 * caller's frame and those above it must not return in between. For the profiler's client. */
#define HS_UNWIND_CAPTURE_REGS(regs_ptr)                                                           \
    __asm__ volatile("movq %%rax, 0(%0)\n\t"                                                       \
                     "movq %%rdx, 8(%0)\n\t"                                                       \
                     "movq %%rcx, 16(%0)\n\t"                                                      \
                     "movq %%rbx, 24(%0)\n\t"                                                      \
                     "movq %%rsi, 32(%0)\n\t"                                                      \
                     "movq %%rdi, 40(%0)\n\t"                                                      \
                     "movq %%rbp, 48(%0)\n\t"                                                      \
                     "movq %%rsp, 56(%0)\n\t"                                                      \
                     "movq %%r8, 64(%0)\n\t"                                                       \
                     "movq %%r9, 72(%0)\n\t"                                                       \
                     "movq %%r10, 80(%0)\n\t"                                                      \
                     "movq %%r11, 88(%0)\n\t"                                                      \
                     "movq %%r12, 96(%0)\n\t"                                                      \
                     "movq %%r13, 104(%0)\n\t"                                                     \
                     "movq %%r14, 112(%0)\n\t"                                                     \
                     "movq %%r15, 120(%0)\n\t"                                                     \
                     "leaq 1f(%%rip), %%rax\n"                                                     \
                     "1:\n\t"                                                                      \
                     "movq %%rax, 128(%0)\n\t"                                                     \
                     :                                                                             \
                     : "r"(regs_ptr)                                                               \
                     : "rax", "memory")

#endif
