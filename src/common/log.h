/* log.h: line logging for code that runs inside malloc or a signal handler.
 *
 * Every line is "<program>[<pid>] <tag>: <message>\n", formatted with hs_format into a stack
 * buffer and written with one write(2): no malloc, no stdio, no locale. Lines go to stderr,
 * or to the file named by HEAPSCOPE_LOG_FILE (appended; "%p" in the name becomes the pid),
 * which is opened for each report so that a program closing its descriptors cannot lose it.
 * When that file cannot be opened or written (a full disk, a missing directory), the
 * failure is said once, path and reason, in a line of the same format on stderr, and the
 * lines go to stderr from then on (or, with a hook set, the hook is told and they are
 * dropped: a tool whose stderr is its caller's).
 *
 * Under the heapscope command, HEAPSCOPE_LOG_FD="FD:DEV:INO" names a SOCK_SEQPACKET socket
 * the command reads (it symbolizes and forwards the lines): lines go there, before the log
 * file and stderr, as long as descriptor FD is still that socket (fstat at each report).
 * When the program closed it (or reused the number), or the command is gone (EPIPE; never
 * SIGPIPE), that is said once on stderr and lines go to the log file or stderr from then on.
 *
 * A multi-line report is framed by hs_log_begin()/hs_log_end() so that reports from several
 * threads never interleave. The report lock may be re-entered by its owner and is released
 * automatically in a child after fork (the owner's pid no longer matches).
 */
#ifndef HEAPSCOPE_COMMON_LOG_H
#define HEAPSCOPE_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>

#define HS_LOG_LINE_MAX 2048

/* Sets the tag ("malloc_debug", "heapprofd", ...) and reads the program name and the
 * HEAPSCOPE_LOG_FILE setting. Safe to call more than once and before libc is set up. */
void hs_log_init(const char *tag);

/* Reads the program name and HEAPSCOPE_LOG_FILE once, without touching the tag (for a
 * library whose log lines carry their own tag). */
void hs_log_init_program(void);

/* Sets the log file pattern (as HEAPSCOPE_LOG_FILE would) when HEAPSCOPE_LOG_FILE is not set
 * in the environment: malloc debug's system setting (the environment wins). Call after
 * hs_log_init. */
void hs_log_set_file_pattern(const char *pattern);

/* The log file pattern in use ("" for stderr). */
const char *hs_log_file_pattern(void);

/* Basename of argv[0] of this process ("unknown" before hs_log_init). */
const char *hs_log_program_name(void);

/* Overrides the program name (for a tool that speaks for another program). */
void hs_log_set_program_name(const char *name);

/* Logs one line. Async-signal-safe. */
void hs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hs_vlog(const char *fmt, va_list ap);

/* The same with another tag than hs_log_init's (a library that holds two tools). */
void hs_log_tag(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hs_vlog_tag(const char *tag, const char *fmt, va_list ap);

/* Logs a last line before the process dies (a failed assertion): the lines of a report this
 * thread had gathered are written first, then this line, at once (not gathered). */
void hs_log_fatal_tag(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frames a multi-line report: lines logged in between stay together. */
void hs_log_begin(void);
void hs_log_end(void);

/* Drops the rest of the calling thread's open report (a suppressed one): its lines, until
 * the hs_log_end that closes it, go nowhere. No-op outside a report. */
void hs_log_drop_report(void);

/* Called once, instead of the line on stderr, when the log file cannot be opened or
 * written (err: the errno); the lines after it are dropped. NULL restores the default. */
typedef void (*hs_log_file_error_fn)(const char *path, int err);
void hs_log_set_file_error_hook(hs_log_file_error_fn hook);

/* Redirects all lines to a callback instead of a file (unit tests). NULL restores. */
typedef void (*hs_log_sink_fn)(const char *line, size_t len, void *ctx);
void hs_log_set_sink(hs_log_sink_fn sink, void *ctx);

#endif
