/* perf_map.h: names of JIT-compiled code from perf map files (/tmp/perf-PID.map).
 *
 * Runtimes that generate code write one line per function they emit: "START SIZE NAME", START
 * and SIZE in hex (0x optional), NAME the rest of the line (Node.js with --perf-basic-prof,
 * JVM agents, Python 3.12's -X perf). Code is sometimes moved or re-emitted at the same
 * address: a later line wins over an earlier one that covers the same pc.
 *
 * The file is written by the profiled process and read as hostile input: malformed lines are
 * skipped, names are cut at HS_PERF_MAP_NAME_MAX bytes, and at most HS_PERF_MAP_MAX_BYTES of
 * the file are read. Uses malloc (daemon and report side only).
 */
#ifndef HEAPSCOPE_COMMON_PERF_MAP_H
#define HEAPSCOPE_COMMON_PERF_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HS_PERF_MAP_NAME_MAX 512
#define HS_PERF_MAP_MAX_BYTES ((size_t)256 << 20)

struct hs_perf_map;

/* Parses perf map text (len bytes). Returns the map (possibly empty), or NULL when out of
 * memory. */
struct hs_perf_map *hs_perf_map_parse(const char *text, size_t len);

/* Reads the perf map of pid: /proc/PID/root/tmp/perf-PID.map while the process lives (its own
 * view of /tmp), else /tmp/perf-PID.map. NULL when there is none (or out of memory). */
struct hs_perf_map *hs_perf_map_load(pid_t pid);

/* The name of the code holding pc, or NULL. */
const char *hs_perf_map_lookup(const struct hs_perf_map *m, uintptr_t pc);

size_t hs_perf_map_size(const struct hs_perf_map *m);

void hs_perf_map_free(struct hs_perf_map *m);

#endif
