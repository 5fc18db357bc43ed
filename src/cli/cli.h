/* cli.h: the heapscope command's subcommands and the helpers they share. */
#ifndef HEAPSCOPE_CLI_H
#define HEAPSCOPE_CLI_H

#include "options.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Each subcommand takes the arguments after its name (argv[0] is the subcommand name) and
 * returns the process exit status (or does not return when it execs the program). */
int hs_cmd_debug(int argc, char **argv);
int hs_cmd_leaks(int argc, char **argv);
int hs_cmd_report(int argc, char **argv);
int hs_cmd_profile(int argc, char **argv);
int hs_cmd_dumpheap(int argc, char **argv);
int hs_cmd_symbolize(int argc, char **argv);

/* Finds libNAME (e.g. "libmalloc_debug.so") for the build tree or the installed layout and
 * writes its absolute path to out. Returns 0, or -1 after printing where it looked. */
int hs_find_library(const char *name, char *out, size_t cap);

/* Parses malloc debug options with the shim's parser; errors are printed as
 * "heapscope COMMAND: PROGRAM: ..." (program: the basename the shim would print). */
bool hs_cli_parse_options(const char *command, const char *program, const char *options,
                          struct hs_md_config *cfg);

/* Whether path can be written (tried by creating it, removed again when it did not exist):
 * false with the reason in why ("No such file or directory", "No space left on device (its
 * file system is full)" ...). */
bool hs_file_writable(const char *path, char *why, size_t cap);

/* Checks, before a program is exec'ed with HEAPSCOPE_LOG_FILE=pattern, that the shim will be
 * able to write its log there. Returns true, or false after printing "heapscope COMMAND:
 * cannot write the log file PATH: REASON". */
bool hs_check_log_file(const char *command, const char *pattern);

/* Checks, before a program is exec'ed with the malloc debug options cfg, the files the shim
 * will write by itself: record_allocs_file (with record_allocs) and, when pid_known (the
 * options apply to the program itself, whose pid is ours), the heap dump at exit (with
 * backtrace_dump_on_exit). Returns true, or false after printing which and why. */
bool hs_check_shim_files(const char *command, const struct hs_md_config *cfg, bool pid_known);

/* Reads a whole small file (/proc maps, environ) into a malloc'ed, NUL-terminated buffer;
 * NULL with errno set. */
char *hs_read_small_file(const char *path, size_t *len);

/* The number after "<field>:" in a /proc status file (path), read in `base` (10 for PPid and
 * TracerPid, 16 for the signal masks); 0 when the file or the field is missing. */
unsigned long long hs_proc_status_field(const char *path, const char *field, int base);

/* The maps of a process a command was pointed at, or NULL after telling why (no such
 * process, another user's, exited (a zombie), not allowed to inspect). */
char *hs_target_maps(const char *command, pid_t pid, size_t *len);

/* True when process pid is gone or has exited and is a zombie (kill(pid, 0) still works on
 * those): nothing will answer a request any more. */
bool hs_process_exited(pid_t pid);

/* The value of name in a NUL-separated environment block (/proc/PID/environ), or NULL. */
const char *hs_environ_value(const char *env, size_t len, const char *name);

/* The pid a command pointed at `pid` should look at: the program a `heapscope debug` or
 * `heapscope leaks -- PROGRAM` command runs (its one child) when pid is such a command (the
 * same executable as this one), pid itself otherwise. */
pid_t hs_program_of_command(pid_t pid);

/* Prepends `lib` to LD_PRELOAD in this process's environment. Returns 0 or -1. */
int hs_preload_prepend(const char *lib);

#endif
