/* result_codec.h: the sweeper's result on the pipe to the checking process.
 *
 * Stream layout (native byte order and struct layout: both ends are the same library in the
 * same process image):
 *     header   struct hs_mu_result_header (magic, version, error, record size, summary,
 *              record count)
 *     records  num_records x struct UnreachableLeak
 *     trailer  struct hs_mu_result_trailer (magic, FNV-1a 64 of header and records)
 * A failed check sends a header with error < 0 (a negative errno value) and no records.
 *
 * The writer (hs_mu_result_write) runs in the sweeper: raw write(2) only, no malloc, loops
 * over EINTR and partial writes, waits with poll on a non-blocking descriptor. The reader
 * (hs_mu_result_read) runs in the normal process: it may use malloc, bounds every wait by a
 * deadline, and trusts nothing: a truncated, garbled or hostile stream gives an error code,
 * never a crash, and the memory it allocates grows only with records actually received and
 * never beyond min(header count, limit) records.
 *
 * Threading: both functions are reentrant (no global state).
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_RESULT_CODEC_H
#define HEAPSCOPE_MEMUNREACHABLE_RESULT_CODEC_H

#include <heapscope/memunreachable.h>

#include <stddef.h>
#include <stdint.h>

#define HS_MU_RESULT_MAGIC 0x554d5348u         /* "HSMU" */
#define HS_MU_RESULT_TRAILER_MAGIC 0x444e4548u /* "HEND" */
#define HS_MU_RESULT_VERSION 1u

struct hs_mu_result_header {
    uint32_t magic;
    uint32_t version;
    int32_t error;        /* 0, or a negative errno value: the check failed */
    uint32_t record_size; /* sizeof(struct UnreachableLeak) */
    uint64_t num_leaks;   /* every unreachable allocation */
    uint64_t leak_bytes;
    uint64_t num_allocations;
    uint64_t allocation_bytes;
    uint64_t skipped_pages; /* unreadable pages read as zeros */
    uint64_t num_records;   /* struct UnreachableLeak records that follow */
};

struct hs_mu_result_trailer {
    uint32_t magic;
    uint32_t reserved; /* 0 */
    uint64_t checksum; /* FNV-1a 64 over the header and record bytes */
};

/* The summary the sweeper sends with the records. */
struct hs_mu_result_summary {
    size_t num_leaks, leak_bytes, num_allocations, allocation_bytes, skipped_pages;
};

/* Writes a complete result: error 0 with the summary and n records, or error < 0 with
 * neither (summary may be NULL then). Returns 0, or a negative errno value (EPIPE when the
 * reader went away: the caller should ignore SIGPIPE). Async-signal-safe, no malloc. */
int hs_mu_result_write(int fd, int error, const struct hs_mu_result_summary *summary,
                       const struct UnreachableLeak *leaks, size_t n);

/* Reads a result into *info (leaks malloc'ed: free with free(info->leaks); num_leaks,
 * leak_bytes, num_allocations, allocation_bytes, num_reported_leaks set; version untouched),
 * waiting at most timeout_ms in total (< 0: no limit). A result with more than `limit` records
 * is refused. skipped_pages may be NULL. Returns 0, or
 *   the sweeper's error (negative errno) when it reported a failure,
 *   -ETIMEDOUT  the deadline passed,
 *   -EPIPE      end of stream before the result was complete (the sweeper died),
 *   -EPROTO     a malformed result (bad magic, version, sizes, counts, checksum...),
 *   -ENOMEM     no memory for the records,
 *   another negative errno value when reading failed.
 * On error *info has no leaks (leaks NULL, counts 0). */
int hs_mu_result_read_limited(int fd, struct UnreachableMemoryInfo *info, size_t limit,
                              int timeout_ms, size_t *skipped_pages);

/* hs_mu_result_read_limited with no limit beyond the header's own count (memory still grows
 * only with the records that actually arrive). */
int hs_mu_result_read(int fd, struct UnreachableMemoryInfo *info, int timeout_ms);

#endif
