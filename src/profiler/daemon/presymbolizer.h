/* presymbolizer.h: symbolizes the pcs of a profiled process's call sites in the background,
 * while the process runs, so that the profile written when it exits finds them in the
 * symbolizer's per-pc cache.
 *
 * Why: the first pc met in an object makes the symbolizer open it, inflate its compressed
 * debug sections (Debian's libc debug file) and index its units. At the end of a python3
 * run sampled at 4096 that was 165-240 ms of the "wrote ... final" time, and the command (and
 * whoever waits for the profile) waited for it after the program had exited. The work is the
 * same either way, since the dump symbolizes every pc of the trie; done during the run it
 * lands on a CPU the program leaves idle when there is one.
 *
 * One worker thread for the daemon, started by the first hs_presym_add. It takes the queued
 * pcs process by process in turn, HS_PRESYM_BATCH at a time, and symbolizes each one under
 * that process's lock. Every other user of the symbolizer (the maps re-read, a profile
 * written) takes the same lock with hs_presym_lock, so the symbolizer, which is not
 * thread-safe, is used by one thread at a time.
 *
 * Only on a CPU nobody else wants. The worker must not take CPU time from a program that keeps
 * every CPU busy (malloc_bench at 2 threads on 2 CPUs ran 1.43x glibc with an ungated worker,
 * 1.26x without it). It starts or goes on with a batch only while the CPUs it may run on had
 * room for it over the last HS_PRESYM_LOOK_MS: their idle time plus the worker's own CPU time
 * over that stretch, at least HS_PRESYM_ROOM of one CPU (cpu_room.h). It looks before every
 * pc, measuring again once a stretch is over; after a wait on an empty queue it measures a
 * whole new stretch first. While there is no room it waits, the batch in hand, and looks
 * again; hs_presym_free ends such a wait. The dump does what is
 * left, as before. (Read at one instant, the runnable count of /proc/loadavg let a batch start
 * while malloc_bench's workers were starting: in 2 of 6 runs at 2 threads its first pc,
 * inflating libc's debug sections, took 60 ms of CPU beside them.) It runs at the daemon's
 * priority all the same: a lower one (nice, SCHED_IDLE) would leave a dump waiting behind a
 * starved worker holding the lock, and could not be raised again without privileges.
 *
 * Failures cost only the head start: when the worker cannot be started or the queue cannot
 * grow, the pcs are left to the dump, which symbolizes them as before.
 */
#ifndef HEAPSCOPE_PROFILER_PRESYMBOLIZER_H
#define HEAPSCOPE_PROFILER_PRESYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HS_PRESYM_BATCH 64        /* pcs taken from one process before the next one's turn */
#define HS_PRESYM_LOOK_MS 100     /* the stretch over which the CPUs' room is measured */
#define HS_PRESYM_ROOM 0.75       /* the room the worker needs, in CPUs */

struct hs_symbolizer;
struct hs_presym;

/* A queue in front of sym (not taken over: the caller frees it after hs_presym_free), or
 * NULL when out of memory. */
struct hs_presym *hs_presym_new(struct hs_symbolizer *sym);

/* Drops the queued pcs and returns once the worker no longer uses sym. NULL is a no-op. Not
 * with the lock held. */
void hs_presym_free(struct hs_presym *ps);

/* Queues pcs[0..n) (copied) for symbolizing. */
void hs_presym_add(struct hs_presym *ps, const uintptr_t *pcs, size_t n);

/* Exclusive use of the symbolizer, for anyone but the worker. */
void hs_presym_lock(struct hs_presym *ps);
void hs_presym_unlock(struct hs_presym *ps);

struct hs_presym_stats {
    uint64_t queued;     /* pcs queued */
    uint64_t symbolized; /* of which the worker symbolized */
    uint64_t paused;     /* times the worker, a batch of this queue in hand, waited for room */
};
void hs_presym_get_stats(struct hs_presym *ps, struct hs_presym_stats *st);

/* Turns the gate off (false) or on (true, the default), for tests that need the worker to run
 * whatever the machine's load. */
void hs_presym_set_idle_only(bool on);

/* Waits until every queued pc was symbolized, at most timeout_ms. Returns true when done. */
bool hs_presym_wait(struct hs_presym *ps, unsigned timeout_ms);

#endif
