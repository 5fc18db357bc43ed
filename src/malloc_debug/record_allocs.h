/* record_allocs.h: malloc debug's allocation recorder (options record_allocs,
 * record_allocs_file, record_allocs_on_exit).
 *
 * Every allocation call the shim serves is appended to a fixed-size table as one record;
 * the table is written to the record file, one line per record, when the process receives
 * SIGRTMAX-18 (46), and to "<file>.<pid>" at exit with record_allocs_on_exit. The lines:
 *
 *   TID: malloc 0xPTR SIZE START END
 *   TID: free 0xPTR START END
 *   TID: calloc 0xPTR NMEMB SIZE START END
 *   TID: realloc 0xNEW 0xOLD SIZE START END
 *   TID: memalign 0xPTR ALIGNMENT SIZE START END   (memalign, aligned_alloc, posix_memalign,
 *                                                   valloc, pvalloc)
 *   TID: thread_done 0x0 END                       (a recording thread exited)
 *
 * TID is the kernel thread id, pointers are lower-case hex ("0x0" for NULL), START and END
 * are CLOCK_MONOTONIC nanoseconds before and after the operation. The signal handler only
 * sets a flag; the table is written by the next malloc or free (hs_md_record_dump_if_requested)
 * and emptied afterwards. When the table fills up, "Maximum number of records added, all new
 * operations will be dropped." is logged once and later records are dropped until the next
 * write empties it.
 *
 * Nothing here calls malloc. The table is an mmap(MAP_NORESERVE) reservation made on first
 * use, so a large record_allocs=N costs address space, not memory, until records arrive.
 *
 * Threading: all functions are thread-safe. A record costs one atomic fetch_add on a shared
 * word, six plain stores and a clock read (record_allocs.c explains the scheme); a record
 * made while the table is being written waits for the write to finish, so no record is lost,
 * and a write waits for every place already handed out to be filled in. Hence the shim must
 * make every call of this module while holding none of its own locks.
 * Signals: only the installed handler is async-signal-safe. A record made by a signal handler
 * that interrupted a record on the same thread is dropped if the table is being written at
 * that moment (it cannot wait for a write that waits for the interrupted record).
 * Re-entry: the module raises hs_md_in_shim (debug_state.h) around pthread_setspecific and
 * around the writing, so whatever those allocate goes straight to glibc.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_RECORD_ALLOCS_H
#define HEAPSCOPE_MALLOC_DEBUG_RECORD_ALLOCS_H

#include "options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The message logged when the table becomes full (tests compare it). */
#define HS_MD_RECORD_FULL_MSG "Maximum number of records added, all new operations will be dropped."

/* Turns recording on with cfg's record_allocs_num_entries, record_allocs_file and options
 * (HS_OPT_VERBOSE logs how to trigger a write; HS_OPT_RECORD_ALLOCS_ON_EXIT is acted on by
 * hs_md_record_write_at_exit). Installs the SIGRTMAX-18 handler (SA_RESTART | SA_SIGINFO |
 * SA_ONSTACK) and creates the thread-exit key. Returns false, after logging why, when either
 * fails; recording stays off then. cfg is copied.
 *
 * Called once by the shim's initialisation, before any record call. May be called again
 * (unit tests) when no other thread is recording: the table is then discarded and
 * re-reserved with the new size. Never allocates. */
bool hs_md_record_init(const struct hs_md_config *cfg);

/* True between a successful hs_md_record_init and process exit. */
bool hs_md_record_enabled(void);

/* CLOCK_MONOTONIC in nanoseconds: take it before the operation and pass it as start_ns. */
uint64_t hs_md_record_now_ns(void);

/* Append one record each, for calls that return new memory; call them after the operation.
 * The end timestamp is taken inside. ptr may be NULL (a failed allocation is recorded with
 * 0x0). Records are silently dropped when recording is off or the table is full. Never
 * allocate (the first record of a thread registers it for its thread_done record with
 * pthread_setspecific, under hs_md_in_shim). */
void hs_md_record_malloc(const void *ptr, size_t size, uint64_t start_ns);
void hs_md_record_calloc(const void *ptr, size_t nmemb, size_t size, uint64_t start_ns);
void hs_md_record_memalign(const void *ptr, size_t alignment, size_t size, uint64_t start_ns);

/* Calls that release memory (free, realloc) are recorded in two steps, so that their record
 * comes before the record of any allocation that reuses the released address on another
 * thread: hs_md_record_reserve() BEFORE the operation takes a place in the table, and
 * hs_md_record_free() / hs_md_record_realloc() after it fills that place in.
 *
 * Contract: every reserve must be followed on the same thread by exactly one of
 * hs_md_record_free, hs_md_record_realloc or hs_md_record_cancel with the returned slot, on
 * every path (error paths too: Android records a free of a bad pointer all the same), and
 * without holding any shim lock at the reserve (a write waits for reserved places to be
 * filled in). Writes requested in between on the same thread are deferred to its next call,
 * and the thread must not fork in between (only a signal handler could). Passing
 * HS_MD_RECORD_NO_SLOT (nothing was reserved: recording off, table full) does nothing. */
#define HS_MD_RECORD_NO_SLOT UINT64_MAX
uint64_t hs_md_record_reserve(void);
void hs_md_record_free(uint64_t slot, const void *ptr, uint64_t start_ns);
void hs_md_record_realloc(uint64_t slot, const void *new_ptr, const void *old_ptr, size_t size,
                          uint64_t start_ns);
void hs_md_record_cancel(uint64_t slot); /* leaves the place empty (not written) */

/* Writes the table to the record file if SIGRTMAX-18 arrived since the last write. Costs one
 * relaxed load when it did not. Call it at the start of malloc and free, outside any lock the
 * shim holds and not from inside a record call. */
void hs_md_record_dump_if_requested(void);

/* With record_allocs_on_exit, writes the table to "<record_allocs_file>.<pid>" (nothing
 * otherwise). Call it once at exit (atexit handler or library destructor). */
void hs_md_record_write_at_exit(void);

/* Fork handlers: hs_md_record_lock() in the prepare handler waits for reserved places to be
 * filled in and holds new records back; hs_md_record_unlock() in both the parent and the
 * child handler releases them (in the child it also repairs the state left by threads that
 * did not survive the fork and refreshes the cached thread id). The child keeps the records.
 * The prepare handler must run before the shim takes its own locks (a free holding a place
 * may need them to finish): register with pthread_atfork after the shim's other handlers,
 * since prepare handlers run in reverse order of registration. */
void hs_md_record_lock(void);
void hs_md_record_unlock(void);

/* How many places the last hs_md_record_lock waited on: those handed out since the one before
 * (or since the table was last written), not the whole table. */
uint64_t hs_md_record_fork_checked(void);

#endif
