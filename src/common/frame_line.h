/* frame_line.h: Android-format frame lines taken apart, without allocating.
 *
 *     "          #00  pc 00000000000011f7  /path/overflow (main+65)"
 * as hs_backtrace_log prints them (backtrace.h): the frame number, rel_pc (the pc in the
 * file's own address space), the module's path (" (deleted)" noted apart) and the function.
 * Used by the heapscope command (source lines, JSON, suppressions) and by the shim's
 * suppressions, which match the lines the report prints. Async-signal-safe.
 */
#ifndef HEAPSCOPE_COMMON_FRAME_LINE_H
#define HEAPSCOPE_COMMON_FRAME_LINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A frame line taken apart; pointers into the line (not NUL-terminated: lengths). */
struct hs_frame_line {
    unsigned index;   /* #NN */
    uint64_t rel_pc;  /* after "pc " */
    const char *path; /* the module as printed, without " (deleted)" */
    size_t path_len;
    bool deleted;         /* " (deleted)" followed the path */
    const char *function; /* inside "(function+offset)", or NULL */
    size_t function_len;
    size_t indent; /* spaces before '#' */
};

/* Parses the part of a log line after its "prog[pid] tag: " prefix. False when it is not a
 * frame line. */
bool hs_frame_line_parse(const char *body, size_t len, struct hs_frame_line *out);

#endif
