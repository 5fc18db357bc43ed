/* unwinder.h: the profiler daemon's unwinder of copied user stacks (x86_64, DWARF CFI).
 *
 * On a sampled allocation the client in the profiled process copies its registers (struct
 * hs_unwind_regs, see HS_UNWIND_CAPTURE_REGS in unwind_regs.h) and the raw bytes of its
 * stack, from the stack pointer up to at most some limit, into shared memory. The daemon turns that
 * copy into the list of pcs of the thread's frames, innermost first, with hs_unwind. The profiled
 * process is never stopped, and none of its memory is read except the copy and, only where the CFI
 * asks for memory outside it (never for ordinary frames), through the /proc/PID/mem descriptor the
 * caller may give or the mapped ELF files.
 *
 * How (the default, HS_UNWIND_MODE_CACHED): the unwind rules of each pc are computed once with
 * libdw (dwarf_cfi_addrframe on the module's .eh_frame, else .debug_frame) and kept in a hash
 * table keyed by the lookup address (the pc of the innermost frame and of a frame interrupted
 * by a signal, pc - 1 for the others, which are return addresses). A rule is "simple" when the
 * CFA is a register plus an offset and the return address and each callee-saved register (rbx,
 * rbp, r12-r15) is either unchanged or saved at CFA + offset: then a step is a table lookup
 * and a few 8-byte reads from the copy. Other rules (DWARF expressions: signal trampolines,
 * PLT entries, stack-realigning prologues) are unwound for that one frame by libdwfl
 * (dwfl_getthread_frames on a Dwfl_Thread whose initial state is the frame's known registers),
 * after which the loop continues with the table. A pc in an executable mapping without a
 * module or without CFI (JIT code, the vdso) is unwound with the frame pointer (rbp chain) if
 * rbp points into the copy above the stack pointer. The Dwfl (modules reported from
 * /proc/PID/maps with dwfl_report_elf) is kept per process: mappings that appear are added to
 * it, and only when an executable mapping goes away are it and the table rebuilt.
 * HS_UNWIND_MODE_DWFL unwinds every frame with libdwfl (the same Dwfl, dwfl_attach_state once,
 * dwfl_getthread_frames per sample) and is kept for comparison and as a reference.
 *
 * Measured (bench/unwind_bench.c, Debian 12, elfutils 0.188, libunwind 1.6.2, one core of a
 * 2-vCPU VM): stacks of -O2 -fomit-frame-pointer code through libc's qsort, 8 samples per
 * depth, unwound from the copy after a warm-up; median / p90 per sample (each timed with
 * clock_gettime, ~0.02 us of it is the clock) and samples per second on one core:
 *
 *     frames            cached (default)          libdwfl every frame      libunwind remote
 *     11                0.11 / 0.13 us, 9.7 M/s   3.4 / 3.5 us, 290 k/s    4.1 / 4.2 us, 240 k/s
 *     20                0.21 / 0.24 us, 5.0 M/s   6.5 / 6.7 us, 140 k/s    7.3 / 7.5 us, 125 k/s
 *     40                0.36 / 0.39 us, 2.7 M/s   12.4 / 12.7 us, 75 k/s   14.4 / 14.8 us, 60 k/s
 *     20, 1 DRAP frame  1.14 / 1.28 us, 0.8 M/s   11.4 / 12.4 us, 100 k/s  16.6 / 16.8 us, 56 k/s
 *
 * (heapprofd published a 193 us median; the target is 10 us and 100,000 samples/s.) The last
 * row has one stack-realigning frame whose CFI is expressions: its libdwfl step costs ~0.9 us.
 * libunwind remote (unw_init_remote, accessors reading the copy, _UPT_find_proc_info for the
 * tables, UNW_CACHE_GLOBAL) was measured in the benchmark only and is not used here.
 * Cold: computing a rule costs ~0.2 us once libdwfl has loaded the module's .eh_frame; the first
 * unwind of a new unwinder (11 frames in 4 files) took ~55 us, most of it loading .eh_frames.
 * Memory: 32 bytes a rule in an open-addressing table kept at most half full (1024 slots,
 * 32 KiB, at first; the benchmark's 32 stacks need 22 rules); at the default limit of 2^18
 * rules the table is 16 MiB, and reaching the limit empties it. libdwfl's own memory (modules,
 * their mapped ELF files and parsed CIEs) comes on top.
 *
 * Invariants: pcs returned are absolute; pcs[0] is regs->rip (the capture point), the others
 * call sites: the return address minus 1 (the lookup address above), inside the call
 * instruction, as pprof's Location.address and bionic's frames mean it, except a frame
 * interrupted by a signal, whose pc is exact. Each is symbolized as it is. The signal
 * trampoline's own frame is a call site like the others in both modes (libdwfl calls it an
 * activation; libgcc and the cached mode look it up at pc - 1, which its CFI covers). Frames
 * whose call site lies in a skip range (the profiler's client library) are unwound through
 * but not returned. Only pcs that lie in an executable mapping of the current maps are
 * returned; the pc that ended an unwind is in hs_unwind_result.stop_pc. Every step must move
 * the stack pointer up (to higher addresses) and at most HS_UNWIND_MAX_STEPS steps are taken,
 * so any input (garbage registers or stack) ends in bounded time without reading outside the
 * copy except as described above.
 *
 * Threading: an unwinder is not thread-safe; use one per profiled process and thread of the
 * daemon (or lock around it). Different unwinders can be used from different threads. Nothing
 * here is async-signal-safe (malloc, libdw).
 */
#ifndef HEAPSCOPE_PROFILER_UNWINDER_H
#define HEAPSCOPE_PROFILER_UNWINDER_H

#include "stack_gap.h"
#include "unwind_regs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum hs_unwind_mode {
    HS_UNWIND_MODE_CACHED = 0, /* rule table, libdwfl for complex rules (default) */
    HS_UNWIND_MODE_DWFL = 1,   /* every frame through dwfl_getthread_frames */
};

/* Why an unwind ended. */
enum hs_unwind_stop {
    HS_UNWIND_END = 0,     /* the outermost frame (return address undefined or 0) */
    HS_UNWIND_MAX_FRAMES,  /* pcs is full, or HS_UNWIND_MAX_STEPS steps were taken (there may
                              be more frames) */
    HS_UNWIND_TRUNCATED,   /* the next read falls past the end of the stack copy */
    HS_UNWIND_UNKNOWN_MAP, /* stop_pc is in no mapping: re-read the maps (hs_unwinder_set_maps)
                              and, if the copy is still there, unwind again */
    HS_UNWIND_NOT_CODE,    /* stop_pc is in a mapping that is not executable (garbage) */
    HS_UNWIND_NO_INFO,     /* no CFI for stop_pc and no usable frame pointer */
    HS_UNWIND_BAD_FRAME,   /* the rules gave an impossible frame (the stack pointer did not
                              move up, a register the rule needs is unknown, libdwfl failed) */
};

/* A word of the copy an unwind read: its offset from the sampled stack pointer, its value. */
struct hs_unwind_word {
    uint64_t off, val;
};

/* The most parts of hs_unwind_result.unread. */
#define HS_UNWIND_UNREAD 8

/* The most words of hs_unwind_result.outer. */
#define HS_UNWIND_OUTER_READS 64

/* What one hs_unwind did. */
struct hs_unwind_result {
    enum hs_unwind_stop stop;
    uintptr_t stop_pc;     /* the pc whose frame could not be unwound (0 for END/MAX_FRAMES) */
    unsigned steps;        /* frames unwound, dropped ones included */
    unsigned dropped;      /* frames not returned because they were in a skip range */
    unsigned cache_misses; /* rules computed with libdw during this unwind */
    unsigned slow_steps;   /* frames unwound by libdwfl (complex rules; all in MODE_DWFL) */
    unsigned fp_steps;     /* frames unwound with the frame pointer (no CFI) */
    /* Bytes of the copy, from its start, up to the end of the highest word the unwind read:
     * the same unwind of a copy cut at this length gives the same frames (the profiler's
     * daemon tells the client how much stack a thread's samples need, stack_hints.h). */
    size_t copy_used;
    /* A read fell into a gap the copy left out (stop is then HS_UNWIND_TRUNCATED). */
    bool read_in_gap;
    /* unread and outer were filled: stop is HS_UNWIND_END and the unwinder was asked for them
     * (hs_unwinder_want_parts). The fields below are not zeroed otherwise. */
    bool parts_known;
    /* With stop HS_UNWIND_END: the HS_UNWIND_UNREAD longest parts of the span from byte 8 to
     * copy_used that the unwind did not read, at least HS_STACK_GAP_MIN bytes each, lowest
     * first (a gap the copy left out is one of them, or inside one): the same unwind of a copy
     * without them gives the same frames. More than a sample's HS_STACK_GAPS, so that the
     * daemon can find those that stay unread from sample to sample among them. */
    unsigned nunread;
    struct hs_stack_gap unread[HS_UNWIND_UNREAD];
    /* With stop HS_UNWIND_END: the highest words the unwind read (the outermost frames' return
     * addresses and saved registers), highest first. Where two unwinds read the same words with
     * the same values, from the top down, the same activations were on the stack. */
    unsigned nouter;
    struct hs_unwind_word outer[HS_UNWIND_OUTER_READS];
};

/* Totals since hs_unwinder_new, and the current size of the state. */
struct hs_unwind_stats {
    uint64_t unwinds, frames;                /* hs_unwind calls, pcs returned */
    uint64_t stops[HS_UNWIND_BAD_FRAME + 1]; /* unwinds by enum hs_unwind_stop */
    uint64_t cache_hits, cache_misses;       /* rule lookups (MODE_CACHED) */
    uint64_t slow_steps, fp_steps;
    uint64_t cache_flushes;            /* the table was emptied (full, or code unmapped) */
    uint64_t dwfl_rebuilds;            /* the Dwfl was rebuilt (an executable mapping went) */
    size_t cache_entries, cache_bytes; /* rules held, bytes of the table */
    size_t modules, modules_failed;    /* ELF files reported to libdwfl / that failed */
};

struct hs_unwinder;

/* Creates the unwinder of process pid (pid <= 0: this process; used for /proc/PID/map_files and
 * /proc/PID/root when a mapped file cannot be opened by its path, and as libdwfl's thread id).
 * proc_mem_fd, if not -1, is an open /proc/PID/mem (borrowed: it must stay open while the unwinder
 * exists); it is only read for memory that the CFI of a complex rule asks for outside the stack
 * copy and the stack's mapping. No mapping is known until hs_unwinder_set_maps. Returns NULL on
 * failure (out of memory, libdwfl unusable). */
struct hs_unwinder *hs_unwinder_new(pid_t pid, int proc_mem_fd);

/* Frees everything (the ELF files are closed). NULL is allowed. */
void hs_unwinder_free(struct hs_unwinder *u);

/* Sets the mappings from the text of /proc/PID/maps (len bytes, need not be NUL-terminated).
 * Call it first and again when an unwind stops with HS_UNWIND_UNKNOWN_MAP (rate-limiting is
 * the caller's policy). Executable file mappings become libdwfl modules (ELF files opened by
 * path, checked against the mapping's device and inode, else /proc/PID/map_files or
 * /proc/PID/root; a file that cannot be found is counted in stats.modules_failed and its pcs
 * are unwound with the frame pointer). Mappings that stayed are kept with their rules; if an
 * executable mapping went away, the Dwfl and the rule table are rebuilt. Returns 0, or -1 on
 * allocation failure (the previous mappings are then kept). */
int hs_unwinder_set_maps(struct hs_unwinder *u, const char *maps_text, size_t len);

/* Frames with a pc in [start, end) are unwound through but not returned (the profiler's client
 * library). Up to HS_UNWIND_MAX_SKIP ranges; start == end == 0 clears them all. Returns 0, or
 * -1 if the table is full or start > end. */
#define HS_UNWIND_MAX_SKIP 4
int hs_unwinder_skip_range(struct hs_unwinder *u, uintptr_t start, uintptr_t end);

/* Selects how frames are unwound (default HS_UNWIND_MODE_CACHED). */
void hs_unwinder_set_mode(struct hs_unwinder *u, enum hs_unwind_mode mode);

/* Most rules the table holds before it is emptied (default HS_UNWIND_DEFAULT_CACHE_LIMIT, 32
 * bytes each, the table at most twice as many slots). Values under 64 are taken as 64. */
#define HS_UNWIND_DEFAULT_CACHE_LIMIT (1u << 18)
void hs_unwinder_set_cache_limit(struct hs_unwinder *u, size_t max_rules);

/* Most steps of one unwind, whatever max is. */
#define HS_UNWIND_MAX_STEPS 1024

/* Unwinds the copy of a thread's stack: stack holds stack_len bytes that were at addresses
 * [regs->rsp, regs->rsp + stack_len) when regs were captured (NULL with 0 is allowed). Stores
 * up to max pcs, innermost first, and returns how many; *res (may be NULL) says why it stopped
 * and what it took. The copy is only read during the call. */
size_t hs_unwind(struct hs_unwinder *u, const struct hs_unwind_regs *regs, const void *stack,
                 size_t stack_len, uintptr_t *pcs, size_t max, struct hs_unwind_result *res);

/* The same for a copy that leaves out ngaps parts of the span (stack_gap.h): stack holds the
 * span's bytes minus the gaps', stack_len of them. A read of a word in a gap ends the unwind
 * as HS_UNWIND_TRUNCATED with res->read_in_gap; gaps that are not valid for the span end it as
 * HS_UNWIND_BAD_FRAME before any read. */
size_t hs_unwind_gapped(struct hs_unwinder *u, const struct hs_unwind_regs *regs, const void *stack,
                        size_t stack_len, const struct hs_stack_gap *gaps, unsigned ngaps,
                        uintptr_t *pcs, size_t max, struct hs_unwind_result *res);

/* Whether complete unwinds fill hs_unwind_result.unread and .outer (default: yes). Finding them
 * sorts the words read: a caller that needs them now and then (the profiler's daemon, 1 sample
 * in 8) asks for them only then. */
void hs_unwinder_want_parts(struct hs_unwinder *u, bool want);

/* Copies the totals into *out. */
void hs_unwinder_stats(const struct hs_unwinder *u, struct hs_unwind_stats *out);

/* Empties the rule table (for benchmarks and tests of the cold path). */
void hs_unwinder_flush_cache(struct hs_unwinder *u);

#endif
