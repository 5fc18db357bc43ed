/* program_run.h: runs a program under a preloaded heapscope library and owns its reports.
 *
 * `heapscope debug` and `heapscope leaks -- PROGRAM` fork: the child execs the program (its
 * environment already holds LD_PRELOAD and the options), the command stays the parent. The
 * program's stdin, stdout and stderr are the command's, untouched; its report lines come to
 * the command through a SOCK_SEQPACKET socket whose descriptor it inherits, named by
 * HEAPSCOPE_LOG_FD="FD:DEV:INO" (log.h: the lines go there while FD is still that socket, and
 * to stderr once the program closed it). The program's own children inherit both, so their
 * reports come through too. The command reads the socket as lines arrive, passes them through
 * a report stream (report_stream.h: source lines, suppressions, JSON), and writes them to its
 * stderr or to the --log file.
 *
 * Exit: the program's status, as if it had been exec'ed in place: its exit code, or, when a
 * signal killed it, the same signal raised in the command (core dumps off), so that a shell
 * sees "killed by SIGABRT" as before; error_exitcode (when >= 0) instead when an unsuppressed
 * finding was reported. Signals sent to the command (kill, not the terminal, whose signals
 * reach the program directly) are passed on to the program, so `kill -TERM` and the heap
 * dump signal work on the command's pid too; a command killed outright (SIGKILL) takes the
 * program with it (PR_SET_PDEATHSIG), as when it was the program. The command reads until the program has exited
 * and its lines are drained; lines written later by descendants that outlive it go to their
 * stderr (log.h).
 */
#ifndef HEAPSCOPE_CLI_PROGRAM_RUN_H
#define HEAPSCOPE_CLI_PROGRAM_RUN_H

#include "suppressions.h"

#include <stdbool.h>

struct hs_run_options {
    const char *command; /* "debug" */
    bool symbolize;
    const char *log_file;  /* --log pattern (%p: the program's pid), or NULL for stderr */
    const char *json_file; /* --json, or NULL */
    const char *supp_file; /* --suppressions, or NULL */
    int error_exitcode;    /* -1: none */
};

/* Reads and parses a suppressions file; prints "heapscope COMMAND: FILE:LINE: ..." and
 * returns false when it cannot. */
bool hs_load_suppressions(const char *command, const char *path, struct hs_supp_set *set);

/* Parses --error-exitcode's value (1..255); prints why and returns -1 when bad. */
int hs_parse_exitcode(const char *command, const char *text);

/* The report options of the commands that run a program (debug, leaks): getopt_long values,
 * HS_RUN_LONG_OPTIONS for their long_options table (with -l for --log), and
 * hs_run_option to take one into run: 1 when c was one of them, 0 when not, -1 when its
 * value is bad (said on stderr). */
enum { HS_RUN_OPT_SUPP = 512, HS_RUN_OPT_EXITCODE, HS_RUN_OPT_JSON, HS_RUN_OPT_NO_SYMBOLIZE };
#define HS_RUN_LONG_OPTIONS                                                                        \
    {"log", required_argument, NULL, 'l'},                                                         \
        {"suppressions", required_argument, NULL, HS_RUN_OPT_SUPP},                                \
        {"error-exitcode", required_argument, NULL, HS_RUN_OPT_EXITCODE},                          \
        {"json", required_argument, NULL, HS_RUN_OPT_JSON},                                        \
        {"no-symbolize", no_argument, NULL, HS_RUN_OPT_NO_SYMBOLIZE}
int hs_run_option(int c, const char *arg, struct hs_run_options *run);

/* Runs argv (environment prepared by the caller) as described above; returns the exit
 * status for the command (or raises the program's fatal signal). */
int hs_run_program(char **argv, const struct hs_run_options *o);

#endif
