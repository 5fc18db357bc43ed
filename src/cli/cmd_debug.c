/* cmd_debug.c: `heapscope debug`, run a program with libmalloc_debug.so preloaded.
 *
 * The options are checked here first, with the shim's own parser, so that a typo stops
 * before the program runs instead of leaving it unchecked. Then the command execs the
 * program in place (same pid, same exit status and signals, nothing in between).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_OPTIONS "guard fill"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: heapscope debug [-o OPTIONS] [--program NAME] [--log FILE] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Runs PROGRAM with heapscope's malloc debug (libmalloc_debug.so) preloaded: the\n"
        "Linux port of Android's malloc debug. Corrupted guards, double frees and bad\n"
        "pointers are reported in Android's format with a backtrace.\n"
        "\n"
        "Options:\n"
        "  -o, --options OPTIONS  malloc debug options, as in LIBC_DEBUG_MALLOC_OPTIONS\n"
        "                         (default: \"" DEFAULT_OPTIONS "\")\n"
        "      --program NAME     enable only in processes whose program name is NAME\n"
        "                         (children of PROGRAM inherit the setting)\n"
        "  -l, --log FILE         append reports to FILE instead of stderr; %%p in FILE\n"
        "                         becomes the process id. A FILE that cannot be written\n"
        "                         stops the command; one that fails later (a full disk)\n"
        "                         is said once on stderr, where the reports then go\n"
        "  -h, --help             show this help\n"
        "\n"
        "Malloc debug options (full list and meaning: docs/malloc_debug.md):\n"
        "  guard[=N] front_guard[=N] rear_guard[=N]   guard bytes around each allocation\n"
        "                                             (default 32; 0xaa front, 0xbb rear)\n"
        "  fill[=N] fill_on_alloc[=N] fill_on_free[=N] fill new memory with 0xeb and freed\n"
        "                                             memory with 0xef (default: all of it)\n"
        "  expand_alloc[=N]        add N bytes to every allocation (default 16)\n"
        "  backtrace[=N]           record N frames (default 16) of each allocation\n"
        "  free_track[=N]          keep N freed blocks (default 100) to catch use after free\n"
        "                          and double free, with the stack that freed them\n"
        "  leak_track              list the allocations still live at exit\n"
        "  verify_pointers         report pointers malloc never returned\n"
        "  page_guard[=rear|front] every block on pages of its own: a read or write past its\n"
        "                          end (or before its start) or after its free faults and is\n"
        "                          reported with its stack (heapscope's own)\n"
        "  sample_guard[=N]        the same for about one allocation in N (default 5000):\n"
        "                          cheap enough for production (heapscope's own)\n"
        "  backtrace_dump_on_exit  write a heap dump at exit (with backtrace);\n"
        "                          kill -47 PID writes one at any time\n"
        "  abort_on_error          abort after the first error report\n"
        "  verbose                 log that malloc debug is enabled and its signals\n"
        "\n"
        "Examples:\n"
        "  heapscope debug -- ./myprog arg\n"
        "  heapscope debug -o \"rear_guard=64 abort_on_error\" -l /tmp/md.%%p.log -- ./myprog\n"
        "  heapscope debug -o \"backtrace free_track leak_track\" -- ./myprog\n");
}

int hs_cmd_debug(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"options", required_argument, NULL, 'o'},
        {"program", required_argument, NULL, 'P'},
        {"log", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *options = DEFAULT_OPTIONS, *program = NULL, *log_file = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:l:h", long_options, NULL)) != -1) {
        switch (c) {
        case 'o':
            options = optarg;
            break;
        case 'P':
            program = optarg;
            break;
        case 'l':
            log_file = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "heapscope debug: no program given\n\n");
        usage(stderr);
        return 2;
    }

    struct hs_md_config cfg;
    if (!hs_cli_parse_options("debug", argv[optind], options, &cfg))
        return 2;

    if (log_file && !hs_check_log_file("debug", log_file))
        return 1;
    if (!hs_check_shim_files("debug", &cfg, program == NULL))
        return 1;
    char lib[PATH_MAX];
    if (hs_find_library("libmalloc_debug.so", lib, sizeof(lib)) != 0)
        return 1;
    if (hs_preload_prepend(lib) != 0 || setenv("LIBC_DEBUG_MALLOC_OPTIONS", options, 1) != 0 ||
        (program && setenv("LIBC_DEBUG_MALLOC_PROGRAM", program, 1) != 0) ||
        (log_file && setenv("HEAPSCOPE_LOG_FILE", log_file, 1) != 0)) {
        perror("heapscope debug: setting the environment");
        return 1;
    }
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "heapscope debug: cannot run '%s': %s\n", argv[optind], strerror(errno));
    return 127;
}
