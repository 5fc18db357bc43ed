/* fault_context.c: the faulting access's stack and kind from a signal context (see
 * fault_context.h). */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include "fault_context.h"

#include "capture_gate.h"
#include "signal_trampoline.h"

#include <libunwind.h>
#include <signal.h>
#include <ucontext.h>

#if defined(__aarch64__)
#include <asm/sigcontext.h>
#endif

/* Bound on unw_step iterations (a corrupt stack can loop). */
#define HS_FAULT_MAX_STEPS 4096

#if defined(__x86_64__)
#define HS_X86_TRAP_PAGE_FAULT 14
#define HS_X86_PF_WRITE 0x2
#endif

int hs_fault_access(const void *ucontext)
{
    const ucontext_t *uc = ucontext;
    if (!uc)
        return HS_FAULT_UNKNOWN;
#if defined(__x86_64__)
    if (uc->uc_mcontext.gregs[REG_TRAPNO] != HS_X86_TRAP_PAGE_FAULT)
        return HS_FAULT_UNKNOWN;
    return (uc->uc_mcontext.gregs[REG_ERR] & HS_X86_PF_WRITE) ? HS_FAULT_WRITE : HS_FAULT_READ;
#elif defined(__aarch64__)
    /* The records after the general registers: {magic, size} headers, 0 ends them. */
    const uint8_t *p = (const uint8_t *)uc->uc_mcontext.__reserved;
    const uint8_t *end = p + sizeof(uc->uc_mcontext.__reserved);
    while (p + sizeof(struct _aarch64_ctx) <= end) {
        const struct _aarch64_ctx *h = (const struct _aarch64_ctx *)p;
        if (h->magic == 0 || h->size < sizeof(*h))
            break;
        if (h->magic == ESR_MAGIC && p + sizeof(struct esr_context) <= end) {
            uint64_t esr = ((const struct esr_context *)p)->esr;
            uint64_t ec = esr >> 26;
            if (ec != 0x24 && ec != 0x25) /* data abort from a lower or the same level */
                return HS_FAULT_UNKNOWN;
            return (esr & (1u << 6)) ? HS_FAULT_WRITE : HS_FAULT_READ; /* WnR */
        }
        p += h->size;
    }
    return HS_FAULT_UNKNOWN;
#else
    return HS_FAULT_UNKNOWN;
#endif
}

uintptr_t hs_fault_pc(const void *ucontext)
{
    const ucontext_t *uc = ucontext;
    if (!uc)
        return 0;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    return 0;
#endif
}

/* The unwinding proper (inside the capture gate): 0 when libunwind cannot start. */
static size_t unwind(void *ucontext, uintptr_t *frames, size_t max)
{
    unw_cursor_t cursor;
    if (unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) != 0)
        return 0;
    size_t n = 0, steps = 0;
    unw_word_t prev = 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        /* Frame 0 was read from a register: exact. The others are return addresses. */
        frames[n] = n == 0 ? (uintptr_t)ip
                           : hs_call_site((uintptr_t)ip, hs_is_signal_trampoline((uintptr_t)prev));
        n++;
        prev = ip;
    } while (n < max && ++steps < HS_FAULT_MAX_STEPS && unw_step(&cursor) > 0);
    return n;
}

size_t hs_fault_backtrace(void *ucontext, uintptr_t *frames, size_t max)
{
    if (max == 0 || !ucontext)
        return 0;
    uintptr_t pc = hs_fault_pc(ucontext);
    /* libunwind takes the same locks here as in any capture: a fork in another thread must
     * not copy them held (sample_guard_recover lets the program go on, and even a report that
     * ends in abort() can meet a fork in another thread). A refused gate (captures off, or
     * this fault interrupted a capture of its own thread while a fork waits for it) leaves
     * the exact pc alone. */
    if (!hs_capture_gate_enter()) {
        if (pc == 0)
            return 0;
        frames[0] = pc;
        return 1;
    }
    size_t n = unwind(ucontext, frames, max);
    hs_capture_gate_leave();
    if (n == 0 && pc != 0)
        frames[n++] = pc;
    return n;
}
