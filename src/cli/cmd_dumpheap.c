/* cmd_dumpheap.c: `heapscope dumpheap -p PID [-o FILE]`, Android's `am dumpheap -n`.
 *
 * Asks a process running malloc debug with backtraces (started by `heapscope debug -o
 * backtrace`, `heapscope leaks`, or with the shim preloaded and LIBC_DEBUG_MALLOC_OPTIONS
 * holding `backtrace`) for a native heap dump, and delivers it to the caller: the process
 * writes PREFIX.PID.txt on SIGRTMAX-17 (47) at its next allocation call, as on Android; this
 * command waits for the complete file (it ends with "END"), moves it to FILE and prints a
 * one-line summary. The process's options come from its /proc/PID/environ (or malloc debug's
 * system setting: target_options.c), read with the shim's own parser.
 */
#include "cli.h"
#include "heap_dump.h"

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

#define DUMP_SIGNAL_OFFSET 17 /* SIGRTMAX-17 */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: heapscope dumpheap -p PID [-o FILE] [--timeout SECONDS]\n"
            "\n"
            "Asks a running process for a native heap dump (Android's 'am dumpheap -n') and\n"
            "writes it to FILE: every live allocation with the stack that made it, in Android's\n"
            "heap dump format, which 'heapscope report' turns into a readable report.\n"
            "The process must run malloc debug with backtraces, e.g. started with\n"
            "  heapscope debug -o backtrace -- PROGRAM     or     heapscope leaks -- PROGRAM\n"
            "It writes the dump at its next malloc or free call.\n"
            "\n"
            "Options:\n"
            "  -p, --pid PID       the process (the PID of a 'heapscope debug' command stands for\n"
            "                      the program it runs)\n"
            "  -o, --output FILE   where the dump goes (default: PROGRAM.PID.heapdump.txt)\n"
            "      --timeout S     how long to wait for the dump (default 30)\n"
            "  -h, --help          show this help\n");
}

/* The process's malloc debug options, checked for what a dump needs. Fills cfg; returns 0,
 * or 1 after saying why not. */
static int target_options(pid_t pid, struct hs_md_config *cfg, char *program, size_t cap)
{
    size_t len;
    char *maps = hs_target_maps("dumpheap", pid, &len);
    if (maps == NULL)
        return 1;
    bool shim = strstr(maps, "/libmalloc_debug.so") != NULL ||
                strstr(maps, "/libmemunreachable.so") != NULL;
    free(maps);
    if (!shim) {
        fprintf(stderr,
                "heapscope dumpheap: process %d does not run malloc debug; start it with "
                "'heapscope debug -o backtrace -- PROGRAM'\n",
                (int)pid);
        return 1;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    char *comm = hs_read_small_file(path, &len);
    snprintf(program, cap, "%s", comm && len > 0 ? comm : "process");
    program[strcspn(program, "\n")] = '\0';
    free(comm);
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    char *env = hs_read_small_file(path, &len);
    const char *options = hs_target_md_options(pid, env, len);
    bool parsed = options != NULL && hs_cli_parse_options("dumpheap", program, options, cfg);
    free(env);
    if (!parsed || !(cfg->options & HS_OPT_BACKTRACE)) {
        fprintf(stderr,
                "heapscope dumpheap: process %d runs malloc debug without backtraces (option "
                "'backtrace'), so it keeps no heap dump; start it with 'heapscope debug -o "
                "backtrace -- PROGRAM'\n",
                (int)pid);
        return 1;
    }
    return 0;
}

/* True once the file at path is a complete dump (its last line is END). */
static bool dump_complete(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char tail[4];
    struct stat st;
    bool done = fstat(fd, &st) == 0 && st.st_size >= 4 && pread(fd, tail, 4, st.st_size - 4) == 4 &&
                memcmp(tail, "END\n", 4) == 0;
    close(fd);
    return done;
}

static bool dump_unavailable(const char *path)
{
    size_t len;
    char *text = hs_read_small_file(path, &len);
    bool unavailable = text && strstr(text, "Native heap dump not available") != NULL;
    free(text);
    return unavailable;
}

/* The process could not write its dump (heap_dump.h): the reason, into why. */
static bool dump_failed(const char *path, char *why, size_t cap)
{
    size_t len, n = strlen(HS_MD_HEAP_DUMP_FAILED);
    char *text = hs_read_small_file(path, &len);
    bool failed = text && len > n && strncmp(text, HS_MD_HEAP_DUMP_FAILED, n) == 0 &&
                  text[len - 1] == '\n';
    if (failed)
        snprintf(why, cap, "%.*s", (int)(len - n - 1), text + n);
    free(text);
    return failed;
}

/* Moves src to dst (copying across file systems). Returns 0 or -1 with errno set. */
static int move_file(const char *src, const char *dst)
{
    if (rename(src, dst) == 0)
        return 0;
    if (errno != EXDEV)
        return -1;
    size_t len;
    char *data = hs_read_small_file(src, &len);
    if (data == NULL)
        return -1;
    FILE *out = fopen(dst, "we");
    int rc = out && fwrite(data, 1, len, out) == len ? 0 : -1;
    if (out && fclose(out) != 0)
        rc = -1;
    int err = errno;
    free(data);
    if (rc == 0)
        unlink(src);
    else if (out)
        unlink(dst); /* no half dump under the name asked for */
    errno = err;
    return rc;
}

int hs_cmd_dumpheap(int argc, char **argv)
{
    enum { OPT_TIMEOUT = 256 };
    static const struct option longopts[] = {
        {"pid", required_argument, NULL, 'p'},
        {"output", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long pid = 0, timeout_s = 30;
    const char *output = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "p:o:h", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'p':
            pid = strtol(optarg, &end, 10);
            if (*end != '\0' || pid <= 0 || pid > INT32_MAX) {
                fprintf(stderr, "heapscope dumpheap: '%s' is not a process id\n", optarg);
                return 2;
            }
            break;
        case 'o':
            output = optarg;
            break;
        case OPT_TIMEOUT:
            timeout_s = strtol(optarg, &end, 10);
            if (*end != '\0' || timeout_s <= 0) {
                fprintf(stderr, "heapscope dumpheap: --timeout takes a number of seconds\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "heapscope dumpheap: see 'heapscope dumpheap --help'\n");
            return 2;
        }
    }
    if (pid == 0 || optind != argc) {
        fprintf(stderr, "heapscope dumpheap: give the process with -p PID (see --help)\n");
        return 2;
    }
    pid = hs_program_of_command((pid_t)pid);
    struct hs_md_config cfg;
    char program[64], dump[PATH_MAX + 32], out[PATH_MAX];
    if (target_options((pid_t)pid, &cfg, program, sizeof(program)) != 0)
        return 1;
    snprintf(dump, sizeof(dump), "%s.%ld.txt", cfg.backtrace_dump_prefix, pid);
    if (output == NULL) {
        snprintf(out, sizeof(out), "%s.%ld.heapdump.txt", program, pid);
        output = out;
    }
    if (unlink(dump) != 0 && errno != ENOENT) {
        fprintf(stderr, "heapscope dumpheap: cannot remove the old dump %s: %s\n", dump,
                strerror(errno));
        return 1;
    }
    char why[256];
    if (!hs_file_writable(dump, why, sizeof(why))) {
        fprintf(stderr, "heapscope dumpheap: process %ld cannot write its heap dump %s: %s\n",
                pid, dump, why);
        return 1;
    }
    if (kill((pid_t)pid, SIGRTMAX - DUMP_SIGNAL_OFFSET) != 0) {
        fprintf(stderr, "heapscope dumpheap: cannot signal process %ld: %s\n", pid,
                strerror(errno));
        return 1;
    }
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (long waited_ms = 0;; waited_ms += 20) {
        if (dump_complete(dump))
            break;
        if (dump_failed(dump, why, sizeof(why))) {
            fprintf(stderr, "heapscope dumpheap: process %ld could not write its heap dump %s: "
                            "%s\n",
                    pid, dump, why);
            unlink(dump);
            return 1;
        }
        if (dump_unavailable(dump)) {
            fprintf(stderr,
                    "heapscope dumpheap: process %ld has backtraces turned off right now "
                    "(backtrace_enable_on_signal): send it signal %d first\n",
                    pid, SIGRTMAX - 19);
            unlink(dump);
            return 1;
        }
        if (hs_process_exited((pid_t)pid)) {
            fprintf(stderr, "heapscope dumpheap: process %ld exited before its dump was complete\n",
                    pid);
            return 1;
        }
        if (waited_ms >= timeout_s * 1000) {
            fprintf(stderr,
                    "heapscope dumpheap: no dump from process %ld after %ld s: it writes it at "
                    "its next malloc or free, and has made none since (%s)\n",
                    pid, timeout_s, dump);
            return 1;
        }
        nanosleep(&tick, NULL);
    }
    if (move_file(dump, output) != 0) {
        fprintf(stderr, "heapscope dumpheap: cannot move %s to %s: %s\n", dump, output,
                strerror(errno));
        return 1;
    }
    size_t len;
    char *text = hs_read_small_file(output, &len);
    const char *records = text ? strstr(text, "Allocation records: ") : NULL;
    const char *total = text ? strstr(text, "Total memory: ") : NULL;
    printf("heapscope dumpheap: wrote %s (%.*s, %.*s)\n", output,
           records ? (int)strcspn(records, "\n") : 0, records ? records : "",
           total ? (int)strcspn(total, "\n") : 0, total ? total : "");
    printf("heapscope dumpheap: view it with 'heapscope report %s'\n", output);
    free(text);
    return 0;
}
