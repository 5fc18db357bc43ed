/* profile_writer.h: the profiler daemon's output, from a process's heap tracker.
 *
 * Two formats for one heap of one process:
 *  - pprof (gzipped profile.proto, src/common/pprof.h): sample types alloc_objects/count,
 *    alloc_space/bytes, inuse_objects/count, inuse_space/bytes (default inuse_space), period
 *    type space/bytes with the sampling interval, one sample per callsite (rounded values;
 *    callsites whose values all round to 0 are left out); one mapping per line of the maps
 *    holding a pc of the profile (path, build id, offsets) with has_functions etc. set when
 *    symbols were found; one location per distinct pc with its lines, innermost inlined
 *    function first, from the symbolizer (or, for JIT code without ELF symbols, the name the
 *    runtime wrote in its perf map); a pc in no mapping gets a location without one.
 *    Comments: "heapscope heapprofd: pid PID, heap NAME", then "in use at the peak of
 *    sampled bytes" when at_peak, then each line of the caller's statistics lines.
 *  - the Android native heap dump text, v1.2 (what malloc debug writes and `heapscope report`
 *    reads): the live blocks grouped by (callsite, size), "z 0  sz SIZE  num N  bt PCS", the
 *    maps as the MAPS section, END. N is the estimated count, at least 1.
 * Memory: malloc (daemon side). Not thread-safe per symbolizer.
 */
#ifndef HEAPSCOPE_PROFILER_PROFILE_WRITER_H
#define HEAPSCOPE_PROFILER_PROFILE_WRITER_H

#include "heap_tracker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct hs_perf_map;
struct hs_symbolizer;

struct hs_profile_meta {
    int pid;
    uint64_t time_ns;     /* when the dump was taken, ns since the epoch */
    uint64_t duration_ns; /* since the process was first seen */
    uint64_t interval;    /* the sampling interval (the period) */
    const char *maps;     /* the process's /proc/PID/maps text (may be NULL) */
    size_t maps_len;
    const char *const *comments; /* lines for the pprof comments (may be NULL) */
    size_t num_comments;
    bool at_peak; /* in-use values at the peak of sampled bytes (dump at max) */
    /* Names of JIT code (perf_map.h), for pcs the symbolizer cannot name (may be NULL). */
    const struct hs_perf_map *perf_map;
};

/* Writes heap `heap` of t as a gzipped pprof profile to out. sym (may be NULL: no function
 * names) must have the process's mappings declared. Returns 0, or -1 with errno set. */
int hs_profile_write_pprof(const struct hs_tracker *t, uint32_t heap, struct hs_symbolizer *sym,
                           const struct hs_profile_meta *meta, FILE *out);

/* Writes the live blocks of heap `heap` as an Android native heap dump (v1.2). Returns 0, or
 * -1 with errno set. */
int hs_profile_write_android(const struct hs_tracker *t, uint32_t heap,
                             const struct hs_profile_meta *meta, FILE *out);

#endif
