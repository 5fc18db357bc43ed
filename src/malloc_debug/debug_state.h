/* debug_state.h: the shim's process-wide state, set once by init.c and read-only after.
 *
 * `mode` is the only field read on the hot path: every entry point tests it with one
 * predicted branch and calls glibc directly when malloc debug is off (pass-through).
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_DEBUG_STATE_H
#define HEAPSCOPE_MALLOC_DEBUG_DEBUG_STATE_H

#include "arena.h"
#include "options.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

enum hs_md_mode {
    HS_MD_UNINIT = 0,   /* no call has reached the shim yet */
    HS_MD_INITIALIZING, /* one thread is reading the options */
    HS_MD_PASSTHROUGH,  /* off: every call goes straight to glibc */
    HS_MD_DEBUG,        /* on: calls go through debug_alloc.c */
    HS_MD_SAMPLING,     /* sample_guard alone: glibc but for the sampled calls (sampled_alloc.c) */
};

struct hs_md_state {
    int mode; /* enum hs_md_mode; written with release, read with acquire/relaxed */
    struct hs_md_config cfg;
    bool header;        /* allocations carry a header (a guard is on) */
    bool track;         /* live allocations are in the pointer table */
    /* With track: where a block's record is (pointer_table.h), in bytes before the user
     * pointer: the link area of a block with a header (hs_md_user_offset()), else 16 bytes
     * the block gets in front of it (track_lead). Guarded blocks keep theirs in their
     * guarded record instead. */
    size_t track_offset;
    size_t track_lead;  /* 16 with track and no header (the room for the record), else 0 */
    /* malloc and free take the short path of debug_alloc.c (hs_md_lean_malloc/_free): the
     * only work is the pointer table (and the allocation backtrace), because no option adds a
     * header, a fill, a free queue, guarded memory or recording. Set once by init.c. */
    bool lean;
    /* malloc alone takes the short path: lean, or the options on beyond lean's act on free
     * only (free_track, fill_on_free), so that a new block is a table entry all the same. Set
     * once by init.c. */
    bool lean_malloc;
    /* malloc, calloc and free take the fill-only short path (hs_md_fill_malloc/_calloc/_free): the
     * options on are fill_on_alloc and fill_on_free and ones that do nothing per block, so a
     * block is glibc's own, filled. Set once by init.c. */
    bool lean_fill;
    int backtrace_on;   /* allocation backtraces are captured now (SIGRTMAX-19 toggles) */
    size_t extra_bytes; /* bytes added to each request: link area + header + guards + expand */
    size_t guarded_extra_bytes;     /* the same for a guarded block (no glibc chunk after it) */
    bool page_guard;                /* page_guard is on (its address space is reserved) */
    bool sample_guard;              /* sample_guard is on (its pool is reserved) */
    bool guarded;                   /* page_guard or sample_guard is on: one predicted test
                                     * skips the range checks of guarded.h when neither is */
    uintptr_t self_start, self_end; /* our own code, dropped from the top of backtraces */
    char self_path[PATH_MAX];       /* this library's file, to find the elfutils plug-in */
    /* Set (never cleared) by the first error report: the program's heap may be corrupted
     * (a smashed top chunk or bin), so from then on the shim's own optional work that would
     * allocate from glibc (the elfutils plug-in at exit) is skipped. Relaxed atomics. */
    int heap_suspect;
};

extern struct hs_md_state hs_md;

/* The shim's private memory: tables, backtraces, queues (never the program's heap). */
extern struct hs_arena hs_md_arena;

/* Reads the environment and options and sets hs_md.mode; called by the first entry into
 * the shim (and by the library constructor). Returns the final mode. Thread-safe. */
int hs_md_init(void);

/* Re-entry guard: set while the shim runs its own code (init, reports), so allocations made
 * by what that code calls go straight to glibc. */
extern __thread int hs_md_in_shim __attribute__((tls_model("initial-exec")));

/* This library's own malloc (a hidden alias: the address of the definition here, whatever
 * symbol lookup resolves "malloc" to). */
void *hs_md_self_malloc(size_t size);

/* Takes / releases every lock of the shim (fork handlers, malloc_disable). */
void hs_md_lock_everything(void);
void hs_md_unlock_everything(void);
/* The fork child's: per-thread state of the threads that are gone is let go as well. */
void hs_md_unlock_everything_in_child(void);

static inline int hs_md_mode_now(void)
{
    return __atomic_load_n(&hs_md.mode, __ATOMIC_ACQUIRE);
}

#endif
