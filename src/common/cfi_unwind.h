/* cfi_unwind.h: a stack walker with a cache of CFA rules, in front of libunwind.
 *
 * Why: libunwind's unw_backtrace costs ~70 instructions per frame even on its cached path
 * (unw_init_local, its trace cache, per-frame bookkeeping), and the malloc debug shim
 * captures a stack on every allocation (backtrace) or free (free_track). Here each return
 * address maps, through a process-wide direct-mapped cache, to its frame's rule read from the
 * object's DWARF call frame information (.eh_frame, found through PT_GNU_EH_FRAME):
 * "CFA = rsp or rbp + offset, return address at CFA - 8, rbp saved at CFA - 8k or
 * unchanged". A step on a hit is one load of the cache and two of the stack.
 *
 * The walker gives up (returns HS_CFI_FALLBACK, and the caller asks libunwind for the whole
 * stack) on anything it does not model, so its frames are always libunwind's: a pc without
 * CFI (JIT code, which libunwind guesses through), a CFA or register rule that is an
 * expression or another register (signal trampolines, PLT entries, stack realignment), a
 * signal frame, a frame larger than 8 KiB, a CFA that does not move up the stack, x86_64
 * only. The end of the stack is where libunwind ends it: a frame whose return address is
 * undefined in the CFI (_start, clone3) is the last, and a return address of 0 ends it.
 *
 * Cache: 4096 slots of one 64-bit word each (pc and rule packed), read and written with
 * relaxed atomics, so threads share it without locks and a reader never sees half an entry.
 * A pc's rule goes to its home slot or, when another pc holds that, to the neighbouring one
 * (two ways), so that two hot pcs sharing a slot do not evict each other on every walk.
 * Misses look the CFI up with dl_iterate_phdr (the dynamic loader's lock, as libunwind's misses
 * do). When an object was unloaded since the last miss (dl_iterate_phdr's dlpi_subs), the
 * cache is emptied; as with libunwind's own trace cache, entries of an object unloaded after
 * the last miss stay until the next miss, which only matters if another object is then
 * mapped at the same addresses and reached before any miss.
 *
 * Async-signal-safety: as hs_backtrace_capture's fast path (the caller keeps a signal
 * handler of the same thread out, see backtrace.c). Never allocates.
 */
#ifndef HEAPSCOPE_COMMON_CFI_UNWIND_H
#define HEAPSCOPE_COMMON_CFI_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returned by hs_cfi_capture when the walk needs libunwind. */
#define HS_CFI_FALLBACK ((size_t)-1)

/* A thread's registers at one instruction: where a walk can start instead of at
 * hs_cfi_capture's own frame. */
struct hs_cfi_context {
    uintptr_t pc, sp, bp;
};

/* Takes the context of the function this expands in, at this instruction. Why: a caller
 * several frames below the frames it wants (the malloc debug shim, whose own frames are
 * dropped from every stack) starts the walk at its own frame instead of walking up to it. */
#if defined(__x86_64__)
#define HS_CFI_GET_CONTEXT(ctx)                                                                   \
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"                      \
                     : "=r"((ctx)->pc), "=r"((ctx)->sp), "=r"((ctx)->bp))
#else
#define HS_CFI_GET_CONTEXT(ctx) ((ctx)->pc = (ctx)->sp = (ctx)->bp = 0)
#endif

/* Stores up to max call sites of the calling thread into frames: the return addresses
 * unw_backtrace would give from the caller, each minus 1 (hs_call_site: no frame of such a
 * walk follows a signal trampoline), stored as the walk goes so that no second pass converts
 * them. frames[0] is the call site in the function that called hs_cfi_capture, after
 * dropping `skip` more frames. Returns the number stored,
 * or HS_CFI_FALLBACK (frames then hold nothing useful).
 * may_miss false: the walk uses the cache, and the CFI of the object this code is linked
 * into (which cannot be unloaded under it); any other pc whose rule is not cached yet
 * returns HS_CFI_FALLBACK as well, without asking the dynamic loader. Such a walk takes no lock of any
 * kind (not even the dynamic loader's) and makes no system call, so it needs no capture gate
 * (a fork meanwhile copies nothing held) and leaves errno alone. */
size_t hs_cfi_capture(uintptr_t *frames, size_t max, size_t skip, bool may_miss);

/* The same walk from ctx, taken by HS_CFI_GET_CONTEXT in a function whose frame is still on
 * the stack (the caller's, or one of its callers'): frames[0] is the call site in the
 * function that called the one that took ctx, after dropping `skip` more frames and then
 * every leading call site in [drop_start, drop_end) (a caller's own code, dropped as the walk
 * goes instead of copied out afterwards; those frames do not count in max). */
size_t hs_cfi_capture_from(const struct hs_cfi_context *ctx, uintptr_t *frames, size_t max,
                           size_t skip, uintptr_t drop_start, uintptr_t drop_end, bool may_miss);

/* The state of the caller of the function this expands in, at its call instruction, read
 * through that function's frame pointer (the return address above the saved rbp, which
 * __builtin_frame_address keeps): where the walk of HS_CFI_GET_CONTEXT would be after its
 * first step, without taking it. Why: that first step, through the shim's own frame, is on
 * every capture, and its rule is always the same. */
#if defined(__x86_64__)
#define HS_CFI_GET_CALLER(ctx)                                                                    \
    do {                                                                                       \
        const uintptr_t *hs_fp_ = (const uintptr_t *)__builtin_frame_address(0);              \
        (ctx)->pc = (uintptr_t)__builtin_return_address(0) - 1;                                \
        (ctx)->sp = (uintptr_t)(hs_fp_ + 2);                                                   \
        (ctx)->bp = hs_fp_[0];                                                                 \
    } while (0)
#else
#define HS_CFI_GET_CALLER(ctx) ((ctx)->pc = (ctx)->sp = (ctx)->bp = 0)
#endif

/* hs_cfi_capture_from(ctx, ...) for a ctx taken by HS_CFI_GET_CALLER in the same function,
 * with skip 0 and no lock (may_miss false): the same frames, whose first candidate is the
 * call site in site->pc itself (stored unless it is in the drop range). */
size_t hs_cfi_capture_from_caller(const struct hs_cfi_context *site, uintptr_t *frames,
                                  size_t max, uintptr_t drop_start, uintptr_t drop_end);

/* Empties the rule cache (tests). */
void hs_cfi_cache_clear(void);

#endif
