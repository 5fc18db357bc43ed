/* cmd_report.c: `heapscope report`, heap dumps into reports people can read.
 *
 * Reads Android native heap dumps (v1.0 to v1.2: heapscope's malloc debug or an Android
 * device) and pprof heap profiles (gzipped profile.proto), merges several files, symbolizes every
 * address with elfutils through the dump's MAPS section (and --symbols DIR first, as Android's
 * native_heapdump_viewer.py), optionally subtracts a base (--diff), and writes text, an HTML flame
 * graph, folded stacks or pprof.
 */
#include "cli.h"

#include "heap_dump_reader.h"
#include "outputs.h"
#include "pprof.h"
#include "profile_model.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum format { FORMAT_TEXT, FORMAT_HTML, FORMAT_FOLDED, FORMAT_PPROF };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: heapscope report [-o FILE] [--format FORMAT] [--value VALUE] [--top N]\n"
            "                        [--symbols DIR] [--diff BASE] [-q] FILE...\n"
            "\n"
            "Turns heap dumps (Android native heap dumps v1.0-v1.2, as heapscope's malloc debug\n"
            "and Android devices write them) and pprof heap profiles into a report: the call "
            "stacks and functions that\n"
            "hold the memory, symbolized with file:line and inlined functions. Several dumps are\n"
            "added together.\n"
            "\n"
            "Options:\n"
            "  -o, --output FILE   write to FILE (default: standard output); the format follows\n"
            "                      its name: .html, .folded, .pb.gz or .pprof, else text\n"
            "  -f, --format FORMAT text, html (interactive flame graph, one file), folded\n"
            "                      (flamegraph.pl input) or pprof (gzipped profile.proto)\n"
            "      --value VALUE   what to rank (text), write (folded) and show first (HTML,\n"
            "                      pprof): inuse_space (default), inuse_objects, alloc_space\n"
            "                      or alloc_objects (the last two: pprof profiles)\n"
            "      --top N         stacks and functions in the text report (default 10)\n"
            "      --symbols DIR   look binaries up under DIR first (e.g. a device's symbols)\n"
            "      --diff BASE     report what changed since the dump BASE (grew first);\n"
            "                      folded output has two columns: before and after\n"
            "  -q, --quiet         no progress messages\n"
            "  -h, --help          show this help\n"
            "\n"
            "Examples:\n"
            "  heapscope report /tmp/backtrace_heap.1234.txt\n"
            "  heapscope report -o heap.html /tmp/backtrace_heap.1234.txt\n"
            "  heapscope report --diff before.txt after.txt\n");
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int parse_format(const char *s, enum format *f)
{
    static const char *const names[] = {"text", "html", "folded", "pprof"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *f = (enum format)i;
            return 0;
        }
    return -1;
}

/* Running out of memory, wherever it happens, ends the command with this one message and
 * exit status 1 (the libraries return ENOMEM and leave the message to the command). */
static int out_of_memory(void)
{
    fprintf(stderr, "heapscope report: out of memory\n");
    return 1;
}

/* Reads a whole file; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *data = malloc(cap);
    size_t r;
    while (data && (r = fread(data + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *bigger = realloc(data, cap * 2);
            if (!bigger) {
                free(data);
                data = NULL;
            }
            data = bigger;
            cap *= 2;
        }
    }
    int failed = ferror(f), read_errno = data ? errno : ENOMEM;
    fclose(f);
    if (failed || !data) {
        free(data);
        errno = read_errno;
        return NULL;
    }
    *len = n;
    return data;
}

/* A pprof heap profile (anything that is not a heap dump is taken for one). Its description
 * goes to header (when not NULL), whole: however long, it is the user's to read. */
static int load_pprof(struct hs_rep_profile *p, const char *path, const struct hs_rep_options *opt,
                      FILE *header)
{
    size_t len;
    char *data = read_file(path, &len);
    if (!data) {
        if (errno == ENOMEM)
            return out_of_memory();
        fprintf(stderr, "heapscope report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct hs_pprof *pp;
    char err[600];
    int rc = hs_pprof_read(data, len, &pp, err, sizeof(err));
    int read_errno = errno;
    free(data);
    if (rc != 0) {
        if (read_errno == ENOMEM)
            return out_of_memory();
        fprintf(stderr,
                "heapscope report: %s: not an Android native heap dump, nor a pprof "
                "profile: %s\n",
                path, err);
        return 1;
    }
    if (header) {
        /* Every comment, one per line: profilers put their statistics there. */
        fprintf(header, "pprof profile%s%s", hs_pprof_num_comments(pp) ? ": " : "",
                hs_pprof_num_comments(pp) ? hs_pprof_comment_at(pp, 0) : "");
        for (size_t i = 1; i < hs_pprof_num_comments(pp); i++)
            fprintf(header, "\n  %s", hs_pprof_comment_at(pp, i));
    }
    errno = 0;
    rc = hs_rep_add_pprof(p, pp, opt, err, sizeof(err));
    int add_errno = errno;
    hs_pprof_free(pp);
    if (rc != 0) {
        if (add_errno == ENOMEM)
            return out_of_memory();
        fprintf(stderr, "heapscope report: %s: %s\n", path, err);
        return 1;
    }
    return 0;
}

static bool is_heap_dump(const char *path)
{
    static const char magic[] = "Android Native Heap Dump";
    char head[sizeof(magic) - 1];
    FILE *f = fopen(path, "rb");
    if (!f)
        return true; /* the dump reader says why it cannot be opened */
    size_t n = fread(head, 1, sizeof(head), f);
    fclose(f);
    if (n == 0 || memcmp(head, magic, n) == 0)
        return true;
    /* pprof: gzip (1f), zlib (78) or a raw profile.proto, which starts with field 1 or 2
     * (0a, 12). Anything else goes to the dump reader, which says what it expected. */
    unsigned char c = (unsigned char)head[0];
    return !(c == 0x1f || c == 0x78 || c == 0x0a || c == 0x12);
}

/* Reads and symbolizes dumps and profiles into p; returns 0 or 1 after printing the error.
 * The first file's description goes to header (when not NULL). */
static int load(struct hs_rep_profile *p, char **files, int n, const struct hs_rep_options *opt,
                FILE *header)
{
    for (int i = 0; i < n; i++) {
        if (!is_heap_dump(files[i])) {
            if (load_pprof(p, files[i], opt, i == 0 ? header : NULL) != 0)
                return 1;
            continue;
        }
        struct hs_dump d;
        char err[600];
        if (hs_dump_read_file(files[i], &d, err, sizeof(err)) != 0) {
            if (errno == ENOMEM)
                return out_of_memory();
            fprintf(stderr, "heapscope report: %s\n", err);
            return 1;
        }
        if (header && i == 0)
            fprintf(header, "Android Native Heap Dump v1.%d%s%s%s", d.version_minor,
                    d.fingerprint[0] ? ", build '" : "", d.fingerprint,
                    d.fingerprint[0] ? "'" : "");
        errno = 0;
        int rc = hs_rep_add_dump(p, &d, opt, err, sizeof(err));
        int add_errno = errno;
        hs_dump_free(&d);
        if (rc != 0) {
            if (add_errno == ENOMEM)
                return out_of_memory();
            fprintf(stderr, "heapscope report: %s: %s\n", files[i], err);
            return 1;
        }
    }
    return 0;
}

int hs_cmd_report(int argc, char **argv)
{
    enum { OPT_VALUE = 256, OPT_TOP, OPT_SYMBOLS, OPT_DIFF };
    static const struct option long_options[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"value", required_argument, NULL, OPT_VALUE},
        {"top", required_argument, NULL, OPT_TOP},
        {"symbols", required_argument, NULL, OPT_SYMBOLS},
        {"diff", required_argument, NULL, OPT_DIFF},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL, *diff_base = NULL;
    enum format format = FORMAT_TEXT;
    bool format_given = false;
    struct hs_rep_options opt = {NULL, true};
    struct hs_rep_output_options out_opt = {HS_FG_INUSE_BYTES, 10, "", ""};
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:f:qh", long_options, NULL)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case 'f':
            if (parse_format(optarg, &format) != 0) {
                fprintf(stderr,
                        "heapscope report: unknown format '%s' (text, html, folded, "
                        "pprof)\n",
                        optarg);
                return 2;
            }
            format_given = true;
            break;
        case OPT_VALUE:
            if (strcmp(optarg, "inuse_space") == 0) {
                out_opt.value = HS_FG_INUSE_BYTES;
            } else if (strcmp(optarg, "inuse_objects") == 0) {
                out_opt.value = HS_FG_INUSE_COUNT;
            } else if (strcmp(optarg, "alloc_space") == 0) {
                out_opt.value = HS_FG_ALLOC_BYTES;
            } else if (strcmp(optarg, "alloc_objects") == 0) {
                out_opt.value = HS_FG_ALLOC_COUNT;
            } else {
                fprintf(stderr,
                        "heapscope report: unknown value '%s' (inuse_space, "
                        "inuse_objects, alloc_space, alloc_objects)\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_TOP:
            out_opt.top = strtoul(optarg, &end, 10);
            if (*end || out_opt.top == 0) {
                fprintf(stderr, "heapscope report: bad --top '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_SYMBOLS:
            opt.symbols_dir = optarg;
            break;
        case OPT_DIFF:
            diff_base = optarg;
            break;
        case 'q':
            opt.progress = false;
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
        fprintf(stderr, "heapscope report: no dump given\n\n");
        usage(stderr);
        return 2;
    }
    if (!format_given && output) {
        if (ends_with(output, ".html") || ends_with(output, ".htm"))
            format = FORMAT_HTML;
        else if (ends_with(output, ".folded"))
            format = FORMAT_FOLDED;
        else if (ends_with(output, ".pb.gz") || ends_with(output, ".pprof") ||
                 ends_with(output, ".pb"))
            format = FORMAT_PPROF;
    }

    struct hs_rep_profile p;
    hs_rep_profile_init(&p);
    char *header = NULL;
    size_t header_len = 0;
    FILE *header_out = open_memstream(&header, &header_len);
    if (!header_out)
        return out_of_memory(); /* its only failure */
    int rc = load(&p, argv + optind, argc - optind, &opt, header_out);
    if (fclose(header_out) != 0 && rc == 0)
        rc = out_of_memory();
    if (rc == 0 && diff_base) {
        struct hs_rep_profile base;
        hs_rep_profile_init(&base);
        rc = load(&base, (char **)&diff_base, 1, &opt, NULL);
        if (rc == 0 && hs_rep_diff(&p, &base) != 0)
            rc = out_of_memory();
        hs_rep_profile_free(&base);
    }
    if (rc == 0 && out_opt.value >= HS_FG_ALLOC_BYTES && !p.has_alloc) {
        fprintf(stderr, "heapscope report: the input has no allocated values (heap dumps hold "
                        "only what is in use): use inuse_space or inuse_objects\n");
        rc = 2;
    }
    /* The title names every input, whole. */
    char *title = NULL;
    size_t title_len = 0;
    FILE *title_out = rc == 0 ? open_memstream(&title, &title_len) : NULL;
    if (title_out) {
        for (int i = optind; i < argc; i++)
            fprintf(title_out, "%s%s", i > optind ? " + " : "", argv[i]);
        if (diff_base)
            fprintf(title_out, " (diff against %s)", diff_base);
        if (fclose(title_out) != 0)
            title_out = NULL;
    }
    if (rc == 0 && !title_out)
        rc = out_of_memory(); /* a memory stream's only failure */
    FILE *out = NULL;
    if (rc == 0) {
        out = output ? fopen(output, "w") : stdout;
        if (!out && errno == ENOMEM) {
            rc = out_of_memory();
        } else if (!out) {
            fprintf(stderr, "heapscope report: cannot write %s: %s\n", output, strerror(errno));
            rc = 1;
        }
    }
    if (rc != 0) {
        hs_rep_profile_free(&p);
        free(header);
        free(title);
        return rc;
    }
    out_opt.title = title;
    out_opt.header = header;
    switch (format) {
    case FORMAT_TEXT:
        rc = hs_rep_write_text(out, &p, &out_opt);
        break;
    case FORMAT_HTML:
        rc = hs_rep_write_html(out, &p, &out_opt);
        break;
    case FORMAT_FOLDED:
        rc = hs_rep_write_folded(out, &p, &out_opt);
        break;
    case FORMAT_PPROF:
        rc = hs_rep_write_pprof(out, &p, &out_opt);
        break;
    }
    int write_errno = errno;
    if ((output ? fclose(out) : fflush(out)) != 0 && rc == 0) {
        rc = -1;
        write_errno = errno;
    }
    if (rc != 0 && write_errno == ENOMEM)
        out_of_memory();
    else if (rc != 0)
        fprintf(stderr, "heapscope report: cannot write %s: %s\n", output ? output : "the output",
                strerror(write_errno));
    hs_rep_profile_free(&p);
    free(header);
    free(title);
    return rc == 0 ? 0 : 1;
}
