/* heap_dump_reader.h: reading Android native heap dumps (v1.0 to v1.2).
 *
 * Reads what malloc debug writes (heapscope's shim or an Android device):
 *     Android Native Heap Dump v1.2
 *     Build fingerprint: '...'            (v1.1+)
 *     Total memory: N / Allocation records: N / Backtrace size: N
 *     z 0  sz      400  num    1  bt a230 b500
 *       bt_info {"/lib/x.so" 2a0 "func" 24} ...   (v1.2 with backtrace_full; skipped)
 *     MAPS
 *     <lines of /proc/PID/maps>
 *     END
 * Anything damaged or foreign gets an error naming the line and what was expected.
 */
#ifndef HEAPSCOPE_REPORT_HEAP_DUMP_READER_H
#define HEAPSCOPE_REPORT_HEAP_DUMP_READER_H

#include <stddef.h>
#include <stdint.h>

struct hs_dump_record {
    uint64_t size; /* bytes of each allocation */
    uint64_t num;  /* allocations merged into this record */
    uint32_t num_frames;
    uint64_t *frames; /* absolute pcs, innermost first (into hs_dump's frame pool) */
};

struct hs_dump {
    int version_minor;     /* 0, 1 or 2 */
    char *fingerprint;     /* "" when absent */
    uint64_t total_memory; /* as the header says (0 when absent) */
    uint64_t backtrace_size;
    struct hs_dump_record *records;
    size_t num_records;
    char *maps; /* the MAPS section, newline-terminated lines */
    size_t maps_len;
    uint64_t *frame_pool;
};

/* Parses the text at data (len bytes). Returns 0, or -1 with "line N: ..." in err and errno
 * ENOMEM (out of memory) or EINVAL (not a valid dump). */
int hs_dump_parse(const char *data, size_t len, struct hs_dump *out, char *err, size_t err_cap);

/* Reads and parses a file; on error err names the file and the line, and errno says why
 * (ENOMEM: out of memory; EINVAL: not a valid dump; else the file's error). */
int hs_dump_read_file(const char *path, struct hs_dump *out, char *err, size_t err_cap);

void hs_dump_free(struct hs_dump *d);

#endif
