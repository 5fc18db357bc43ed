/* cmd_debug.c: `heapscope debug`, run a program with libmalloc_debug.so preloaded.
 *
 * The options are checked here first, with the shim's own parser, so that a typo stops
 * before the program runs instead of leaving it unchecked. Then the program runs as the
 * command's child, which reads its reports (program_run.h: source lines, suppressions, exit
 * code, JSON) and exits as the program did. --system and --unit put malloc debug in place
 * for programs started later instead (debug_system.c, debug_unit.c).
 */
#include "cli.h"
#include "program_run.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_OPTIONS "guard fill"
#ifndef HS_SETTING_PATH_TEXT
#define HS_SETTING_PATH_TEXT "/etc/heapscope/malloc_debug.conf"
#endif

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: heapscope debug [-o OPTIONS] [--program NAME] [--log FILE] [--suppressions FILE]\n"
        "                       [--error-exitcode N] [--json FILE] [--no-symbolize]\n"
        "                       [--] PROGRAM [ARGS...]\n"
        "       heapscope debug --system enable -o OPTIONS [--program NAME] [--log PATTERN]\n"
        "       heapscope debug --system disable | --system status\n"
        "       heapscope debug --unit NAME[.service] -o OPTIONS [--program NAME] [--log PATTERN]\n"
        "       heapscope debug --unit NAME[.service] --remove\n"
        "\n"
        "Runs PROGRAM with heapscope's malloc debug (libmalloc_debug.so) preloaded: the\n"
        "Linux port of Android's malloc debug. Corrupted guards, double frees and bad\n"
        "pointers are reported in Android's format with a backtrace, each frame followed by\n"
        "its source file and line. The program runs as this command's child: its own\n"
        "output is untouched, and the command exits with its status (or dies of the same\n"
        "signal).\n"
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
        "      --suppressions FILE  leave out the reports FILE matches: lines error:PATTERN\n"
        "                         (errors) and leak:PATTERN (leak_track), PATTERN matched\n"
        "                         against each frame's function, source file and library,\n"
        "                         * for any text; a summary says what was left out\n"
        "      --error-exitcode N exit N (1-255) when any error or leak was reported and not\n"
        "                         suppressed (the program's own status otherwise)\n"
        "      --json FILE        also write each report to FILE as one JSON object per line\n"
        "      --no-symbolize     print frames as the program wrote them, without source lines\n"
        "  -h, --help             show this help\n"
        "\n"
        "Services and whole machines (as root; docs/malloc_debug.md):\n"
        "      --system ACTION    enable: malloc debug for every program started from now\n"
        "                         on: writes the setting " HS_SETTING_PATH_TEXT "\n"
        "                         (OPTIONS, --program, --log) and puts the library first in\n"
        "                         /etc/ld.so.preload (its other lines are kept); refuses a\n"
        "                         library that is missing or does not load.\n"
        "                         disable: removes both. status: says what is installed\n"
        "      --unit NAME        a systemd drop-in for NAME.service, /etc/systemd/system/\n"
        "                         NAME.service.d/heapscope-malloc-debug.conf, whose\n"
        "                         Environment= lines run it under malloc debug; runs\n"
        "                         'systemctl daemon-reload'; restart the service after it\n"
        "      --remove           with --unit: removes the drop-in\n"
        "      --root DIR         with --system or --unit: work on the system image at DIR (a\n"
        "                         container's root) instead of this machine\n"
        "  The environment's LIBC_DEBUG_MALLOC_OPTIONS, when set (even empty), wins over the\n"
        "  setting. Use an absolute --log PATTERN with %%p: one file per process.\n"
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
        "  suppressions=FILE       leave out the reports FILE's rules match, without this\n"
        "                          command too (function and library names only)\n"
        "  verbose                 log that malloc debug is enabled and its signals\n"
        "\n"
        "Examples:\n"
        "  heapscope debug -- ./myprog arg\n"
        "  heapscope debug -o \"rear_guard=64 abort_on_error\" -l /tmp/md.%%p.log -- ./myprog\n"
        "  heapscope debug -o \"backtrace free_track leak_track\" -- ./myprog\n"
        "  heapscope debug --error-exitcode 99 --suppressions known.supp -- ./test_suite\n"
        "  heapscope debug --unit myserver -o backtrace --log /var/log/heapscope/md.%%p.log\n"
        "  heapscope dumpheap -p $(systemctl show -p MainPID --value myserver)\n"
        "  heapscope debug --system enable -o \"guard backtrace\" --program myworker\n");
}

enum { OPT_SYSTEM = 256, OPT_UNIT, OPT_REMOVE, OPT_ROOT };

/* --system / --unit: the setting is written for processes started later; no program runs. */
static int system_or_unit(const char *system, const char *unit, bool remove,
                          const struct hs_debug_setting *s, bool program_given)
{
    if (program_given || (system && unit) || (remove && !unit)) {
        fprintf(stderr, "heapscope debug: %s\n",
                program_given ? "--system and --unit take no program to run"
                : remove      ? "--remove goes with --unit"
                              : "give --system or --unit, not both");
        return 2;
    }
    return system ? hs_debug_system(system, s) : hs_debug_unit(unit, remove, s);
}

int hs_cmd_debug(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"options", required_argument, NULL, 'o'},
        HS_RUN_LONG_OPTIONS,
        {"program", required_argument, NULL, 'P'},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"unit", required_argument, NULL, OPT_UNIT},
        {"remove", no_argument, NULL, OPT_REMOVE},
        {"root", required_argument, NULL, OPT_ROOT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *options = DEFAULT_OPTIONS, *program = NULL;
    const char *system = NULL, *unit = NULL, *root = NULL;
    bool options_given = false, remove = false;
    struct hs_run_options run = {"debug", true, NULL, NULL, NULL, -1};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:l:h", long_options, NULL)) != -1) {
        switch (c) {
        case 'o':
            options = optarg;
            options_given = true;
            break;
        case 'P':
            program = optarg;
            break;
        case OPT_SYSTEM:
            system = optarg;
            break;
        case OPT_UNIT:
            unit = optarg;
            break;
        case OPT_REMOVE:
            remove = true;
            break;
        case OPT_ROOT:
            root = optarg;
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
    if (system || unit || remove) {
        struct hs_debug_setting s = {options_given ? options : NULL, program, run.log_file,
                                     root && strcmp(root, "/") != 0 ? root : NULL};
        return system_or_unit(system, unit, remove, &s, optind < argc);
    }
    if (root) {
        fprintf(stderr, "heapscope debug: --root goes with --system or --unit\n");
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "heapscope debug: no program given\n\n");
        usage(stderr);
        return 2;
    }

    struct hs_md_config cfg;
    if (!hs_cli_parse_options("debug", argv[optind], options, &cfg))
        return 2;

    if (run.log_file && !hs_check_log_file("debug", run.log_file))
        return 1;
    if (!hs_check_shim_files("debug", &cfg, program == NULL))
        return 1;
    char lib[PATH_MAX];
    if (hs_find_library("libmalloc_debug.so", lib, sizeof(lib)) != 0)
        return 1;
    if (hs_preload_prepend(lib) != 0 || setenv("LIBC_DEBUG_MALLOC_OPTIONS", options, 1) != 0 ||
        (program && setenv("LIBC_DEBUG_MALLOC_PROGRAM", program, 1) != 0)) {
        perror("heapscope debug: setting the environment");
        return 1;
    }
    return hs_run_program(argv + optind, &run);
}
