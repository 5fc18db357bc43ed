/* cpu_room.h: how much room the CPUs a thread may run on had for it over a recent stretch of
 * time: the time they sat idle (/proc/stat's idle and iowait of each of those CPUs) plus the
 * thread's own CPU time over that stretch (the room it took itself), in CPUs (1.0: one CPU's
 * worth all along).
 *
 * For work that should only use a CPU nobody else wants (the presymbolizer). Measured over a
 * stretch, not read at one instant: /proc/loadavg's runnable count, read once before a batch,
 * let a batch start while malloc_bench's two workers were starting, and its first pc
 * (inflating libc's debug sections) then took 60 ms of CPU beside them.
 *
 * Not thread-safe: one probe per thread. A probe that cannot read /proc/stat says there is
 * room (the room is an optimisation, never a limit). Needs _GNU_SOURCE (cpu_set_t).
 */
#ifndef HEAPSCOPE_PROFILER_CPU_ROOM_H
#define HEAPSCOPE_PROFILER_CPU_ROOM_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_cpu_room {
    int fd;         /* /proc/stat, or -1 */
    cpu_set_t cpus; /* the CPUs counted: the thread's affinity when opened */
    char *text;     /* read buffer */
    size_t text_cap;
    double tick_ns; /* /proc/stat's unit (USER_HZ) in ns */
    /* The start of the current stretch: */
    uint64_t start_ns;     /* CLOCK_MONOTONIC, 0 when none */
    uint64_t start_idle;   /* idle + iowait ticks of the counted CPUs */
    uint64_t start_own_ns; /* the thread's CPU time */
};

/* Opens the probe for the calling thread. Returns false (the probe then always says there is
 * room) when /proc/stat cannot be read. */
bool hs_cpu_room_open(struct hs_cpu_room *r);
void hs_cpu_room_close(struct hs_cpu_room *r);

/* Starts a new stretch now. */
void hs_cpu_room_restart(struct hs_cpu_room *r);

/* Nanoseconds since the current stretch started (UINT64_MAX when none was started). */
uint64_t hs_cpu_room_elapsed_ns(const struct hs_cpu_room *r);

/* The room over the stretch since the last start, in CPUs, and starts the next stretch. A
 * probe that cannot read says HS_CPU_ROOM_UNKNOWN (more than any machine has). */
#define HS_CPU_ROOM_UNKNOWN 1e9
double hs_cpu_room_take(struct hs_cpu_room *r);

/* Exposed for tests: the sum of the idle and iowait fields (the 4th and 5th numbers) of the
 * "cpuN" lines of /proc/stat's text for the N in cpus. False when no such line was found. */
bool hs_cpu_room_parse(const char *text, const cpu_set_t *cpus, uint64_t *idle_ticks);

#endif
