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

/* The malloc debug options process pid runs with (target_options.c): LIBC_DEBUG_MALLOC_OPTIONS
 * in its environment block env (len bytes, from /proc/PID/environ), or else, when it has the
 * preloaded shim, the system setting's (system_setting.h); NULL when neither applies. The
 * result points into env or into a static buffer. */
const char *hs_target_md_options(pid_t pid, const char *env, size_t len);

/* The pid a command pointed at `pid` should look at: the program a `heapscope debug` or
 * `heapscope leaks -- PROGRAM` command runs (its one child) when pid is such a command (the
 * same executable as this one), pid itself otherwise. */
pid_t hs_program_of_command(pid_t pid);

/* Prepends `lib` to LD_PRELOAD in this process's environment. Returns 0 or -1. */
int hs_preload_prepend(const char *lib);

/* ---- Malloc debug for services and whole machines (`heapscope debug --system/--unit`) ---- */

/* What goes into a system setting or a service's drop-in (cmd_debug.c's -o, --program, --log),
 * and where: root NULL is this machine, else the root directory of a system image (a
 * container's; the tests). */
struct hs_debug_setting {
    const char *options, *program, *log_file;
    const char *root;
};

/* `heapscope debug --system enable|disable|status` (debug_system.c). */
int hs_debug_system(const char *action, const struct hs_debug_setting *s);

/* `heapscope debug --unit NAME [--remove]` (debug_unit.c). */
int hs_debug_unit(const char *unit, bool remove, const struct hs_debug_setting *s);

/* Checks the values before they are written (setting_values.c): options the shim accepts and
 * that turn something on, a program name, an absolute log pattern whose directory exists;
 * prints why not. */
bool hs_debug_check_setting(const struct hs_debug_setting *s);

/* The shim's file name, as ld.so.preload and LD_PRELOAD lines name it. */
#define HS_MD_SHIM_NAME "libmalloc_debug.so"

/* What --system enable and --unit do before writing: checks the setting, finds the shim
 * (lib, PATH_MAX bytes: the path the preload line will name) and checks that it loads where
 * that line points under s->root. Returns 0, or the command's exit status (2: bad setting). */
int hs_debug_prepare_shim(const struct hs_debug_setting *s, char *lib);

/* root + path into out ("/etc/x" under NULL or "/" is "/etc/x"); -1 when it does not fit. */
int hs_root_path(const char *root, const char *path, char *out, size_t cap);

/* Replaces the file at path with data, atomically and durably (replace_file.c): a temporary
 * file in the same directory, fsync, the old file's mode and owner (mode for a new one),
 * rename. Returns 0, or -1 after printing why (the old file is then untouched). */
int hs_replace_file(const char *command, const char *path, const char *data, size_t len,
                    mode_t mode);

/* Removes path durably (a missing file is fine). Returns 0, or -1 after printing why. */
int hs_remove_file(const char *command, const char *path);

/* mkdir -p. Returns 0, or -1 after printing why. */
int hs_make_directories(const char *command, const char *dir, mode_t mode);

/* heapscope's line in a preload list (/etc/ld.so.preload; preload_list.c): the line naming a
 * library whose file name is `name` (e.g. libmalloc_debug.so), found, added (first, or in
 * place of an older one) or removed with the other lines left as they were. add/remove
 * return 0 or -1 after printing why; *removed says whether there was a line. */
bool hs_preload_list_find(const char *path, const char *name, char *out, size_t cap);
int hs_preload_list_add(const char *command, const char *path, const char *lib);
int hs_preload_list_remove(const char *command, const char *path, const char *name, bool *removed);

/* The library at path (shown as `shown`: its path as the loader will see it) can be
 * preloaded: a regular file, an ELF shared object of this machine's class and architecture,
 * and (try_load) it loads into a program with nothing said by the loader. Prints why not. */
bool hs_check_preload_library(const char *command, const char *path, const char *shown,
                              bool try_load);

#endif
