/* main.c: `heapscope`, one command for all of heapscope's tools. Dispatches to a subcommand. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#ifndef HEAPSCOPE_VERSION
#define HEAPSCOPE_VERSION "unknown"
#endif

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"debug", hs_cmd_debug, "run a program under malloc debug: guards, fills, error reports"},
    {"dumpheap", hs_cmd_dumpheap, "ask a running process for a heap dump (Android's am dumpheap)"},
    {"leaks", hs_cmd_leaks, "find unreachable (leaked) memory in a program or a running process"},
    {"profile", hs_cmd_profile, "sample a program's allocations with low overhead (pprof output)"},
    {"report", hs_cmd_report, "turn heap dumps into text, flame graphs, folded stacks or pprof"},
    {"symbolize", hs_cmd_symbolize, "add source lines to the frames of a saved log of reports"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: heapscope COMMAND [OPTIONS] [--] PROGRAM [ARGS...]\n"
                 "\n"
                 "Native-memory tools for Linux programs: find heap corruption, use after free\n"
                 "and leaks, and see where the memory goes, in unmodified programs.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-9s  %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run 'heapscope COMMAND --help' for the options of a command.\n"
                 "Options:\n"
                 "  -h, --help     show this help\n"
                 "  --version      show the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        if (strcmp(name, "help") == 0 && argc > 2) {
            char *help_argv[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0)
                    return commands[i].run(2, help_argv);
            fprintf(stderr, "heapscope: unknown command '%s'\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) {
        printf("heapscope %s\n", HEAPSCOPE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "heapscope: unknown command '%s' (see 'heapscope --help')\n", name);
    return 2;
}
