/* cmd_leaks.c: `heapscope leaks`, unreachable memory in a program or a running process.
 *
 *   heapscope leaks [options] -- PROGRAM ARGS   runs PROGRAM with libmemunreachable.so
 *       preloaded (allocation tracking from the first malloc, backtraces, the signal check
 *       armed) and reports what is unreachable when it exits;
 *   heapscope leaks -p PID                        asks a running process for a check now: the
 *       process writes the report to /tmp/heapscope_unreachable.PID.txt, which this command
 *       prints and removes. A process started that way, or linked with -lmemunreachable,
 *       answers the check signal already; into any other, libmemunreachable.so is loaded with
 *       ptrace first (process_inject.h) and checks glibc's heap itself (no backtraces).
 */
#include "cli.h"
#include "heapscope/memunreachable_injected.h"
#include "process_inject.h"
#include "program_run.h"
#include "report_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_OPTIONS "backtrace check_unreachable_on_signal"
#define REPORT_PATTERN "/tmp/heapscope_unreachable.%d.txt"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: heapscope leaks [--contents] [--limit N] [-o OPTIONS] [-l FILE] [REPORT OPTIONS]\n"
        "                       -- PROGRAM [ARGS...]\n"
        "       heapscope leaks -p PID [--timeout SECONDS] [--no-inject] [--allow-seccomp]\n"
        "                       [REPORT OPTIONS]\n"
        "\n"
        "Finds heap memory that nothing points to any more (leaked), in a live process,\n"
        "pausing its threads for milliseconds (Android's libmemunreachable).\n"
        "\n"
        "  -- PROGRAM ARGS    run PROGRAM and report what is unreachable when it exits; the\n"
        "                     program can also be checked while it runs with -p\n"
        "  -p, --pid PID      check the running process PID now and print the report; a\n"
        "                     process started by 'heapscope leaks' (or linked with\n"
        "                     -lmemunreachable) has backtraces; any other gets the detector\n"
        "                     loaded with ptrace and is checked without backtraces. The PID\n"
        "                     of a 'heapscope leaks -- PROGRAM' command stands for PROGRAM's.\n"
        "                     Exits 0 when nothing is unreachable, 23 (or --error-exitcode's\n"
        "                     N) when leaks were found, 1 when the check failed\n"
        "\n"
        "Each frame of a report is followed by its source file and line.\n"
        "\n"
        "Options:\n"
        "      --contents     show the first 32 bytes of each leak\n"
        "      --limit N      report at most N leaks in detail (default 100)\n"
        "  -o, --options OPTS malloc debug options for PROGRAM (default: \"" DEFAULT_OPTIONS "\")\n"
        "  -l, --log FILE     write PROGRAM's reports to FILE (%%p becomes the pid)\n"
        "      --timeout S    with -p, how long to wait for the report (default 30)\n"
        "      --no-inject    with -p, never load the detector into the process\n"
        "      --allow-seccomp  with -p, load it even into a process under a seccomp filter\n"
        "  -h, --help         show this help\n"
        "\n"
        "Report options (both forms):\n"
        "      --suppressions FILE  leave out the leaks FILE matches: lines leak:PATTERN,\n"
        "                     PATTERN matched against each frame's function, source file\n"
        "                     and library, * for any text; a summary says what was left out\n"
        "      --error-exitcode N  exit N (1-255) when a leak was reported and not\n"
        "                     suppressed (with a program: its own status otherwise)\n"
        "      --json FILE    also write each leak to FILE as one JSON object per line\n"
        "      --no-symbolize print frames without source lines\n"
        "\n"
        "Examples:\n"
        "  heapscope leaks -- ./myserver --port 8080     # report at exit\n"
        "  heapscope leaks -p $(pidof myserver)          # report now, from another shell\n"
        "  heapscope leaks --error-exitcode 23 --suppressions known.supp -- ./tests\n");
}

static int run_program(char **argv, const char *options, const struct hs_run_options *run,
                       long limit, int contents)
{
    const char *log_file = run->log_file;
    struct hs_md_config cfg;
    if (!hs_cli_parse_options("leaks", argv[0], options, &cfg))
        return 2;
    if (!(cfg.options & HS_OPT_TRACK_OPTIONS)) {
        fprintf(stderr, "heapscope leaks: the options must track allocations: add backtrace "
                        "or verify_pointers\n");
        return 2;
    }
    if (log_file && !hs_check_log_file("leaks", log_file))
        return 1;
    if (!hs_check_shim_files("leaks", &cfg, true))
        return 1;
    char lib[PATH_MAX], number[32];
    if (hs_find_library("libmemunreachable.so", lib, sizeof(lib)) != 0)
        return 1;
    snprintf(number, sizeof(number), "%ld", limit);
    if (hs_preload_prepend(lib) != 0 || setenv("LIBC_DEBUG_MALLOC_OPTIONS", options, 1) != 0 ||
        setenv("HEAPSCOPE_UNREACHABLE_AT_EXIT", "1", 1) != 0 ||
        setenv("HEAPSCOPE_UNREACHABLE_LIMIT", number, 1) != 0 ||
        setenv("HEAPSCOPE_UNREACHABLE_CONTENTS", contents ? "1" : "0", 1) != 0) {
        perror("heapscope leaks: setting the environment");
        return 1;
    }
    return hs_run_program(argv, run);
}

struct pid_args {
    pid_t pid;
    int timeout_s;
    bool inject;
    bool allow_seccomp;
    const struct hs_run_options *run;
};

/* Exit status of `leaks -p` when leaks were found and --error-exitcode was not given (as
 * LeakSanitizer's). */
#define LEAKS_FOUND_EXIT 23

/* Prints a check's report (symbolized, suppressions applied, JSON written) and returns the
 * exit status: 0 when nothing unreachable is left, --error-exitcode or 23 otherwise. */
static int print_report(const char *text, size_t len, pid_t pid, const struct hs_run_options *run)
{
    struct hs_supp_set supp;
    if (run->supp_file && !hs_load_suppressions("leaks", run->supp_file, &supp))
        return 2;
    FILE *json = NULL;
    if (run->json_file && !(json = fopen(run->json_file, "we"))) {
        fprintf(stderr, "heapscope leaks: cannot write %s: %s\n", run->json_file, strerror(errno));
        return 1;
    }
    struct hs_report_stream_options ro = {.symbolize = run->symbolize,
                                          .supp = run->supp_file ? &supp : NULL,
                                          .supp_path = run->supp_file,
                                          .out = STDOUT_FILENO,
                                          .program_pid = pid,
                                          .json = json,
                                          .command = "heapscope leaks"};
    struct hs_report_stream *rs = hs_report_stream_new(&ro);
    if (!rs) {
        fputs("heapscope leaks: out of memory\n", stderr);
        return 1;
    }
    fflush(stdout);
    hs_report_stream_feed(rs, text, len);
    hs_report_stream_finish(rs);
    size_t findings = hs_report_stream_findings(rs);
    hs_report_stream_free(rs);
    if (json)
        fclose(json);
    /* "  N bytes in M unreachable allocations": without suppressions M says it, also for the
     * leaks beyond --limit; with them, what is left after them. */
    unsigned long long bytes = 0, count = 0;
    if (sscanf(text, " %llu bytes in %llu unreachable", &bytes, &count) != 2)
        count = 0;
    bool leaks = run->supp_file ? findings > 0 : count > 0 || findings > 0;
    if (!leaks)
        return 0;
    return run->error_exitcode >= 0 ? run->error_exitcode : LEAKS_FOUND_EXIT;
}

/* Loads libmemunreachable.so into a process started without heapscope and arms its check. */
static bool inject_detector(const struct pid_args *a)
{
    char lib[PATH_MAX];
    if (hs_find_library("libmemunreachable.so", lib, sizeof(lib)) != 0)
        return false;
    struct hs_inject_options opt = {lib, "heapscope_unreachable_injected_init", a->allow_seccomp,
                                    5000};
    struct hs_inject_result res;
    if (hs_inject_library("leaks", a->pid, &opt, &res) != 0)
        return false;
    if (res.init_status != HEAPSCOPE_INJECTED_OK) {
        fprintf(stderr, "heapscope leaks: cannot check process %d: %s\n", (int)a->pid,
                heapscope_injected_error_text(res.init_status));
        return false;
    }
    char pause[160];
    hs_inject_describe_pause(&res, pause, sizeof(pause));
    fprintf(stderr, "heapscope leaks: loaded the detector into process %d (%s)\n", (int)a->pid,
            pause);
    return true;
}

/* Checks that the process can answer: it exists, is ours, has the detector and the signal
 * armed (loading the detector when it has no heapscope library at all). Prints the reason and
 * returns false otherwise. */
static bool target_ready(const struct pid_args *a)
{
    char path[64];
    size_t len;
    char *maps = hs_target_maps("leaks", a->pid, &len);
    if (!maps)
        return false;
    bool detector = strstr(maps, "/libmemunreachable.so") != NULL;
    bool shim = strstr(maps, "/libmalloc_debug.so") != NULL;
    free(maps);
    if (!detector && !shim) {
        if (a->inject)
            return inject_detector(a);
        fprintf(stderr,
                "heapscope leaks: process %d has no heapscope library loaded (and --no-inject "
                "was given); start it with 'heapscope leaks -- PROGRAM' or link it with "
                "-lmemunreachable\n",
                (int)a->pid);
        return false;
    }
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)a->pid);
    char *env = hs_read_small_file(path, &len);
    const char *options = hs_target_md_options(a->pid, env, len);
    bool armed = options ? strstr(options, "check_unreachable_on_signal") != NULL : detector;
    free(env);
    if (!armed) {
        fprintf(stderr,
                "heapscope leaks: process %d was started without the malloc debug option "
                "check_unreachable_on_signal, so it does not answer the check signal\n",
                (int)a->pid);
        return false;
    }
    return true;
}

static int check_process(const struct pid_args *a)
{
    pid_t pid = a->pid;
    int timeout_s = a->timeout_s;
    char report[64], why[256];
    snprintf(report, sizeof(report), REPORT_PATTERN, (int)pid);
    /* Before anything is loaded into the process: nothing could come of it. */
    if (kill(pid, 0) == 0 && !hs_file_writable(report, why, sizeof(why))) {
        fprintf(stderr, "heapscope leaks: process %d cannot write its report %s: %s\n", (int)pid,
                report, why);
        return 1;
    }
    if (!target_ready(a))
        return 1;
    if (unlink(report) != 0 && errno != ENOENT) {
        fprintf(stderr, "heapscope leaks: cannot remove the old report %s: %s\n", report,
                strerror(errno));
        return 1;
    }
    if (kill(pid, SIGRTMAX - 16) != 0) {
        fprintf(stderr, "heapscope leaks: cannot signal process %d: %s\n", (int)pid,
                strerror(errno));
        return 1;
    }
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (long waited_ms = 0; waited_ms < timeout_s * 1000L; waited_ms += 20) {
        struct stat st;
        if (stat(report, &st) == 0) {
            if (st.st_uid != getuid() && getuid() != 0) {
                fprintf(stderr, "heapscope leaks: %s belongs to another user; not trusting it\n",
                        report);
                return 1;
            }
            size_t len;
            char *text = hs_read_small_file(report, &len);
            unlink(report);
            if (!text) {
                fprintf(stderr, "heapscope leaks: cannot read %s: %s\n", report, strerror(errno));
                return 1;
            }
            if (strncmp(text, "error: ", 7) == 0) {
                fwrite(text, 1, len, stdout);
                free(text);
                return 1;
            }
            int status = print_report(text, len, pid, a->run);
            free(text);
            return status;
        }
        if (hs_process_exited(pid)) {
            fprintf(stderr, "heapscope leaks: process %d exited before answering\n", (int)pid);
            return 1;
        }
        nanosleep(&tick, NULL);
    }
    fprintf(stderr, "heapscope leaks: no report from process %d after %d s\n", (int)pid, timeout_s);
    return 1;
}

int hs_cmd_leaks(int argc, char **argv)
{
    enum {
        OPT_CONTENTS = 256,
        OPT_LIMIT,
        OPT_TIMEOUT,
        OPT_NO_INJECT,
        OPT_ALLOW_SECCOMP,
    };
    static const struct option long_options[] = {
        HS_RUN_LONG_OPTIONS,
        {"pid", required_argument, NULL, 'p'},
        {"options", required_argument, NULL, 'o'},
        {"contents", no_argument, NULL, OPT_CONTENTS},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"no-inject", no_argument, NULL, OPT_NO_INJECT},
        {"allow-seccomp", no_argument, NULL, OPT_ALLOW_SECCOMP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *options = DEFAULT_OPTIONS;
    struct hs_run_options run = {"leaks", true, NULL, NULL, NULL, -1};
    long pid = 0, limit = 100, timeout_s = 30;
    int contents = 0, c;
    bool inject = true, allow_seccomp = false;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+p:o:l:h", long_options, NULL)) != -1) {
        switch (c) {
        case 'p':
            pid = strtol(optarg, &end, 10);
            if (*end || pid <= 0) {
                fprintf(stderr, "heapscope leaks: bad process id '%s'\n", optarg);
                return 2;
            }
            break;
        case 'o':
            options = optarg;
            break;
        case OPT_CONTENTS:
            contents = 1;
            break;
        case OPT_LIMIT:
            limit = strtol(optarg, &end, 10);
            if (*end || limit < 0) {
                fprintf(stderr, "heapscope leaks: bad limit '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_TIMEOUT:
            timeout_s = strtol(optarg, &end, 10);
            if (*end || timeout_s <= 0 || timeout_s > 86400) {
                fprintf(stderr, "heapscope leaks: bad timeout '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_NO_INJECT:
            inject = false;
            break;
        case OPT_ALLOW_SECCOMP:
            allow_seccomp = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            switch (hs_run_option(c, optarg, &run)) {
            case 1:
                continue;
            case -1:
                return 2;
            }
            usage(stderr);
            return 2;
        }
    }
    if (pid > 0) {
        if (optind < argc) {
            fprintf(stderr, "heapscope leaks: give either -p PID or a program, not both\n");
            return 2;
        }
        if (run.log_file) {
            fprintf(stderr, "heapscope leaks: --log is for a program run by the command; with "
                            "-p the report goes to stdout\n");
            return 2;
        }
        if (run.supp_file) { /* a bad file stops before the process is touched */
            struct hs_supp_set check;
            if (!hs_load_suppressions("leaks", run.supp_file, &check))
                return 2;
            free(check.rules);
            free(check.text);
        }
        pid = hs_program_of_command((pid_t)pid);
        struct pid_args a = {(pid_t)pid, (int)timeout_s, inject, allow_seccomp, &run};
        return check_process(&a);
    }
    if (optind >= argc) {
        fprintf(stderr, "heapscope leaks: no program given\n\n");
        usage(stderr);
        return 2;
    }
    return run_program(argv + optind, options, &run, limit, contents);
}
