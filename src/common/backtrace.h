/* backtrace.h: stack capture and printing that are safe inside malloc.
 *
 * Capture walks the stack with CFA rules read from the CFI and cached by return address
 * (cfi_unwind.h), and hands any stack that walk does not model to libunwind's local unwinder
 * (unw_backtrace, its cached fast path: ~0.2 us for 16 frames against ~8 us for an
 * unw_getcontext/unw_init_local/unw_step loop, measured on x86_64 with libunwind 1.6.2). It does not call malloc: libunwind takes its memory from mmap
 * and its own pools. On a thread's first capture libunwind maps a 256 KiB per-thread frame
 * cache and stores it with pthread_setspecific, which only allocates (calloc) if libunwind's
 * key index is 32 or more; calling hs_backtrace_capture once early (library constructor)
 * creates the key while indices are low, warms the cache and resolves lazy bindings.
 *
 * Printing resolves each frame with /proc/self/maps (proc_maps.h) and the ELF symbol tables
 * of the mapped files (elf_symbols.h), with stack buffers only: no malloc, no stdio, no
 * dladdr. Frames are logged in Android's malloc debug format:
 *     "          #00  pc 00000000000011a9  /usr/bin/foo (main+25)"
 *
 * Threading and signals: both functions are thread-safe. hs_backtrace_log is async-signal-safe
 * (open/read/mmap/write). hs_backtrace_capture may be called from a signal handler, including
 * one that interrupted a capture on the same thread (it then uses libunwind's uncached slow
 * path, because the per-thread fast-path cache is not reentrant), but libunwind looks unwind
 * information up through dl_iterate_phdr, which takes the dynamic loader's lock: a handler that
 * interrupted dlopen/dlclose in the middle of updating the list of objects can see it half
 * updated. Both preserve errno.
 *
 * Fork: every capture passes the capture gate (capture_gate.h), whose fork handlers make a
 * fork wait for the captures in flight in other threads, so that no child inherits one of
 * libunwind's locks held by a thread it does not have; a program that may fork registers
 * them (the shim does). A capture that meets a fork in progress waits for it, or returns 0
 * frames if it interrupted a capture of its own thread; in a child whose fork could not wait
 * (a capture that did not end) every capture returns 0 frames.
 *
 * Stack use (measured on x86_64, mostly libunwind's): a capture needs ~6 KiB, up to ~9 KiB
 * when libunwind parses the unwind information of frames it has not cached yet; the slow path
 * ~7 KiB; hs_backtrace_log ~8 KiB (a struct hs_map with its PATH_MAX path, the log line),
 * hs_backtrace_format the same plus what emit uses. Add
 * ~3 KiB the first time each imported function is called, while lazy binding resolves it.
 * Threads with tiny stacks (PTHREAD_STACK_MIN) can overflow.
 */
#ifndef HEAPSCOPE_COMMON_BACKTRACE_H
#define HEAPSCOPE_COMMON_BACKTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most frames one capture returns (Android's limit for backtrace options). */
#define HS_BACKTRACE_MAX_FRAMES 256

/* Stores up to max_frames (at most HS_BACKTRACE_MAX_FRAMES) frames of the calling thread into
 * frames, innermost first, and returns how many. Frames are call sites: each return address
 * minus 1, an address inside the call instruction (as bionic's malloc debug and Go store
 * them, and as pprof's Location.address means), except a frame interrupted by a signal (the
 * one after glibc's signal trampoline, see signal_trampoline.h), which is its exact pc. With
 * skip == 0 frames[0] is the call site in the function that called hs_backtrace_capture;
 * each unit of skip drops one more frame from the top (e.g. 1 starts at the caller's caller).
 * Returns 0 when max_frames is 0, the stack has no more frames than skipped, or the capture
 * gate refused the capture (see Fork above). The first capture of the process also looks
 * libc up (dl_iterate_phdr). */
size_t hs_backtrace_capture(uintptr_t *frames, size_t max_frames, size_t skip);

/* The frames from ctx (cfi_unwind.h: HS_CFI_GET_CONTEXT), taken in the function that calls
 * this one directly: frames[0] is the call site in that function's caller, after dropping
 * every leading call site in [drop_start, drop_end) (the caller's own code, e.g. the malloc
 * debug shim's; those do not count in max_frames). The walk starts at the context's frame
 * instead of walking up to it, and drops as it goes instead of copying out afterwards; if the
 * walker hands over, libunwind walks from here and drops that function's frame and the same
 * range (unwinding 8 frames more than max_frames to make up for them), so the frames are the
 * same either way. */
struct hs_cfi_context;
size_t hs_backtrace_capture_from(const struct hs_cfi_context *ctx, uintptr_t drop_start,
                                 uintptr_t drop_end, uintptr_t *frames, size_t max_frames);

/* The same frames, from libunwind alone: hs_backtrace_capture first walks the stack with
 * cached CFA rules (cfi_unwind.h) and asks libunwind only when that walk hands over. For
 * tests and measurements of the two. */
size_t hs_backtrace_capture_unwinder(uintptr_t *frames, size_t max_frames, size_t skip);

/* Logs the frames through hs_log, one line per frame in Android's format:
 *     "          #%02zu  pc %016lx  <path>[ (<symbol>+<decimal offset>)]"
 *  - pc is the frame address minus the load bias of the ELF object containing it (0 for ET_EXEC
 *    executables, the load address for ET_DYN objects; see hs_elf_load_bias), i.e. the address
 *    addr2line expects. For an address in no mapping, or in a mapping that is not a file (or
 *    the vdso), the path is "<unknown>" and pc is the absolute address.
 *  - path is the mapping's path as /proc/self/maps shows it (with " (deleted)" if so), or
 *    "[vdso]", whose symbols are read from memory.
 *  - symbol is the mangled name of the function containing the frame (hs_elf_lookup) and
 *    the offset is the frame's from its start. Frames are expected as hs_backtrace_capture
 *    stores them, call sites or exact pcs, so each is looked up as it is (as Android's malloc
 *    debug prints its call-site frames); a return address would name the instruction after
 *    its call.
 * Symbols of a deleted file are only read if the file at its path still has the mapping's
 * device and inode. With n == 0 it logs "  Backtrace failed to get any frames." instead. */
void hs_backtrace_log(const uintptr_t *frames, size_t n);

/* The same lines, handed to emit(line, len, ctx) one by one instead of being logged (line is
 * not NUL-terminated at len necessarily, has no newline, and is only valid during the call;
 * lines are cut at HS_LOG_LINE_MAX - 1 characters). hs_backtrace_log is this with an emit
 * that calls hs_log. Same safety and errno behaviour as hs_backtrace_log; emit may do what
 * its caller's context allows. */
void hs_backtrace_format(const uintptr_t *frames, size_t n,
                         void (*emit)(const char *line, size_t len, void *ctx), void *ctx);

/* A printer: for printing many backtraces of this process (a leak report of 10^5 blocks), the
 * same lines as hs_backtrace_log / hs_backtrace_format, with /proc/self/maps read once into a
 * snapshot (again when a pc is outside every mapping, up to 16 times), ELF files kept open
 * across backtraces, and the text of each distinct frame (pc)
 * remembered, so that a frame seen before costs one hash lookup. Its memory comes from
 * `arena` (no malloc); if the arena runs out, frames are printed without being remembered.
 * A printer belongs to one thread at a time and is not async-signal-safe (the arena takes
 * locks). Mappings that change while it lives (dlclose, then another library at the same
 * address) keep the text first printed for a pc: use one printer per report. Only an
 * executable mapping names a frame (both paths): the pc of a library unloaded since is
 * <unknown>, whatever was mapped there after it.
 * hs_backtrace_printer_new returns NULL when the arena is out of memory. */
struct hs_arena;
struct hs_backtrace_printer;
struct hs_backtrace_printer *hs_backtrace_printer_new(struct hs_arena *arena);
void hs_backtrace_printer_log(struct hs_backtrace_printer *p, const uintptr_t *frames, size_t n);
void hs_backtrace_printer_format(struct hs_backtrace_printer *p, const uintptr_t *frames,
                                 size_t n, void (*emit)(const char *line, size_t len, void *ctx),
                                 void *ctx);
/* Closes the printer's files and returns its memory to the arena. NULL is ignored. */
void hs_backtrace_printer_free(struct hs_backtrace_printer *p);

/* A second source of function names, asked when the ELF symbol tables of the mapped file do
 * not name the frame (a stripped file whose symbols are in a separate debug file). Gets the
 * absolute address looked up; returns true with the function name and the offset of addr in
 * it. It may allocate, so install one only where that is allowed (the shim does it at exit,
 * through an elfutils plug-in). NULL removes it. */
typedef bool (*hs_backtrace_name_fn)(uintptr_t addr, char *name, size_t cap, uintptr_t *offset);
void hs_backtrace_set_name_fallback(hs_backtrace_name_fn fn);

#endif
