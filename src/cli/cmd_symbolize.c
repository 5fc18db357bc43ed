/* cmd_symbolize.c: `heapscope symbolize [FILE]`, source lines for a saved log.
 *
 * For reports written without the command (the shim preloaded by hand, HEAPSCOPE_LOG_FILE,
 * a CI log): the same pass the command makes over a live program's reports (report_stream.h),
 * as a filter from FILE or stdin to stdout. Frames name their files by path and pc in the
 * file, so it works wherever those files are the ones the program ran.
 */
#include "cli.h"
#include "report_stream.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: heapscope symbolize [FILE]\n"
            "\n"
            "Copies a log of heapscope reports (malloc debug, leak_track, memunreachable) from\n"
            "FILE, or stdin without FILE, to stdout with the source file and line after each\n"
            "frame and the functions inlined there, as 'heapscope debug' and 'heapscope leaks'\n"
            "print them live. Other lines pass through unchanged.\n"
            "\n"
            "Options:\n"
            "  -h, --help   show this help\n"
            "\n"
            "Example:\n"
            "  LD_PRELOAD=libmalloc_debug.so ./prog 2> md.log; heapscope symbolize md.log\n");
}

int hs_cmd_symbolize(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "heapscope symbolize: give one file at most (or none for stdin)\n");
        return 2;
    }
    FILE *in = stdin;
    const char *name = "stdin";
    if (optind < argc && strcmp(argv[optind], "-") != 0) {
        name = argv[optind];
        if (!(in = fopen(name, "re"))) {
            fprintf(stderr, "heapscope symbolize: cannot read %s: %s\n", name, strerror(errno));
            return 1;
        }
    }
    struct hs_report_stream_options ro = {
        .symbolize = true, .out = STDOUT_FILENO, .command = "heapscope symbolize"};
    struct hs_report_stream *rs = hs_report_stream_new(&ro);
    char *buf = malloc(65536);
    if (!rs || !buf) {
        fputs("heapscope symbolize: out of memory\n", stderr);
        return 1;
    }
    size_t n;
    while ((n = fread(buf, 1, 65536, in)) > 0)
        hs_report_stream_feed(rs, buf, n);
    int status = 0;
    if (ferror(in)) {
        fprintf(stderr, "heapscope symbolize: reading %s failed: %s\n", name, strerror(errno));
        status = 1;
    }
    hs_report_stream_finish(rs);
    hs_report_stream_free(rs);
    free(buf);
    if (in != stdin)
        fclose(in);
    return status;
}
