/* report_stream.h: the heapscope command's reader of a program's report lines.
 *
 * The lines malloc debug, leak_track and memunreachable write (log.h: "prog[pid] tag: text")
 * pass through here on their way to the user: frame lines get their source line appended
 * (frame_source.h; the functions inlined at that pc as "(inlined)" lines before it), and the
 * lines are grouped into findings, each of which is then checked against the suppressions,
 * counted for the exit status, and written to the JSON file. Lines that belong to no finding
 * go out at once; a finding goes out when its last line has been seen:
 *   error        a malloc debug error report, divider to divider;
 *   leak         a leak_track block ("+++ PROG leaked block of size ..."), to the next line
 *                that is not its backtrace;
 *   leak_stack   a leak_track summary entry ("+++ N blocks of size ..., stack i of n:");
 *   unreachable  a memunreachable leak ("  N bytes unreachable at ADDR"), to the next line
 *                that is not indented under it.
 * Lines are grouped per "prog[pid] tag: " prefix, so the reports of several processes sharing
 * the stream do not mix. Lines with no prefix (a `leaks -p` report) form one group of their own.
 *
 * Not thread-safe; allocates with malloc.
 */
#ifndef HEAPSCOPE_CLI_REPORT_STREAM_H
#define HEAPSCOPE_CLI_REPORT_STREAM_H

#include "suppressions.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct hs_report_stream_options {
    bool symbolize;           /* append source lines */
    struct hs_supp_set *supp; /* or NULL */
    const char *supp_path;    /* for the summary */
    int out;                  /* descriptor the lines go to (written with write(2)) */
    const char *log_pattern;  /* --log FILE, or NULL for out: each process's lines (their
                               * prefix names it; program_pid for lines without one) go to
                               * FILE with "%p" its pid, opened (appending) on its first
                               * line; out is where they go when that fails */
    long program_pid;         /* the program's pid (the JSON's for lines without a prefix) */
    FILE *json;               /* one JSON object per finding, or NULL */
    const char *command;      /* "heapscope debug", for the summary line */
};

struct hs_report_stream;

/* NULL (errno set) when out of memory. */
struct hs_report_stream *hs_report_stream_new(const struct hs_report_stream_options *o);

/* Takes len bytes of the stream (whole lines or not: a partial last line waits for more). */
void hs_report_stream_feed(struct hs_report_stream *rs, const char *data, size_t len);

/* Ends every open finding (and a last line without newline), writes the suppression summary
 * when suppressions were given, and flushes. */
void hs_report_stream_finish(struct hs_report_stream *rs);

/* Unsuppressed findings written so far. */
size_t hs_report_stream_findings(const struct hs_report_stream *rs);

void hs_report_stream_free(struct hs_report_stream *rs);

#endif
