/* report_stream.c: see report_stream.h. */
#define _GNU_SOURCE
#include "report_stream.h"

#include "frame_source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define DIVIDER "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***"
#define MAX_GROUPS 64
#define HS_LINE_MAX 4096 /* a log line (log.h: 2048) with room for its source */

enum kind { K_NONE, K_ERROR, K_LEAK, K_LEAK_STACK, K_UNREACHABLE };
static const char *const kind_names[] = {"", "error", "leak", "leak_stack", "unreachable"};

struct inl {
    char *function, *file;
    unsigned line;
};

struct frame {
    char *stack; /* the title line it is under ("Backtrace at time of failure") */
    unsigned index;
    uint64_t rel_pc;
    char *module, *function; /* as the frame line says (mangled), "" when absent */
    char *demangled, *file;  /* of the real function, from the symbolizer ("" unknown) */
    unsigned line;
    struct inl *inlined; /* innermost first */
    size_t num_inlined;
};

/* A growable array of NUL-terminated strings. */
struct lines {
    char **v;
    size_t n, cap;
};

struct finding {
    enum kind kind;
    bool fault; /* a fault on a guard page (page_guard, sample_guard): never suppressed */
    char *message;
    char *address;
    uint64_t size;
    struct lines text;
    struct frame *frames;
    size_t num_frames, cap_frames;
    char *stack; /* the current backtrace title */
};

struct group {
    char *prefix; /* "prog[pid] tag: ", or "" */
    size_t plen;
    char *program;
    long pid;
    struct finding f;
    unsigned long age;
};

/* Where lines go: a descriptor, and the lines gathered for one write(2). */
struct sink {
    long pid; /* whose log file it is (o.log_pattern) */
    int fd;
    char *name; /* the log file's path, NULL for stdout/stderr */
    size_t len;
    char buf[65536];
};

struct hs_report_stream {
    struct hs_report_stream_options o;
    struct hs_frame_source *fs;
    struct group groups[MAX_GROUPS];
    size_t num_groups;
    unsigned long clock;
    char *partial;
    size_t partial_len, partial_cap;
    size_t findings;
    bool failed_symbolizer;
    bool hold;           /* a finding's lines wait for its end: suppressions or JSON */
    struct sink main;    /* o.out */
    struct sink **procs; /* o.log_pattern: the log file of each process */
    size_t num_procs;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("heapscope: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

static void lines_add(struct lines *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, l->cap * sizeof(*v));
        if (!v) {
            fputs("heapscope: out of memory\n", stderr);
            exit(1);
        }
        l->v = v;
    }
    l->v[l->n++] = s;
}

static void lines_clear(struct lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

static void finding_clear(struct finding *f)
{
    lines_clear(&f->text);
    for (size_t i = 0; i < f->num_frames; i++) {
        struct frame *fr = &f->frames[i];
        free(fr->stack);
        free(fr->module);
        free(fr->function);
        free(fr->demangled);
        free(fr->file);
        for (size_t j = 0; j < fr->num_inlined; j++) {
            free(fr->inlined[j].function);
            free(fr->inlined[j].file);
        }
        free(fr->inlined);
    }
    f->num_frames = 0;
    free(f->message);
    free(f->address);
    free(f->stack);
    f->message = f->address = f->stack = NULL;
    f->size = 0;
    f->fault = false;
    f->kind = K_NONE;
}

struct hs_report_stream *hs_report_stream_new(const struct hs_report_stream_options *o)
{
    struct hs_report_stream *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return NULL;
    rs->o = *o;
    rs->hold = (o->supp && o->supp->count) || o->json;
    rs->main.fd = o->out;
    return rs;
}

size_t hs_report_stream_findings(const struct hs_report_stream *rs)
{
    return rs->findings;
}

/* ---- output ---- */

/* Writes what is buffered; a log file that fails (a full disk) is said once on stderr, and
 * stderr takes over, from the first byte that was not written. */
static void flush_out(struct hs_report_stream *rs, struct sink *k)
{
    size_t done = 0;
    while (done < k->len) {
        ssize_t w = write(k->fd, k->buf + done, k->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (k->fd == STDERR_FILENO || k->fd == STDOUT_FILENO)
            break; /* nowhere else to go */
        int err = w < 0 ? errno : EIO;
        char note[PATH_MAX + 256];
        int n = snprintf(note, sizeof(note),
                         "%s: cannot write the log file %s: %s; reports go to stderr from now "
                         "on\n",
                         rs->o.command, k->name ? k->name : "", strerror(err));
        if (n > 0 && write(STDERR_FILENO, note, (size_t)n) < 0) {
            /* stderr is gone too: nothing to tell */
        }
        close(k->fd);
        k->fd = STDERR_FILENO;
    }
    k->len = 0;
}

static void emit_to(struct hs_report_stream *rs, struct sink *k, const char *s, size_t n)
{
    if (k->len + n + 1 > sizeof(k->buf))
        flush_out(rs, k);
    if (n + 1 > sizeof(k->buf))
        n = sizeof(k->buf) - 1; /* longer than any log line: cut */
    memcpy(k->buf + k->len, s, n);
    k->buf[k->len + n] = '\n';
    k->len += n + 1;
}

static struct sink *sink_of(struct hs_report_stream *rs, struct group *g);

static void emit(struct hs_report_stream *rs, struct group *g, const char *s, size_t n)
{
    emit_to(rs, sink_of(rs, g), s, n);
}

static void emit_str(struct hs_report_stream *rs, struct group *g, const char *s)
{
    emit(rs, g, s, strlen(s));
}

/* The length of the valid UTF-8 sequence at p (1 to 4), or 0. */
static size_t utf8_length(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || p[0] >= 0xf8)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* A JSON string: UTF-8 as it is, control characters escaped, a byte that is not UTF-8 (a
 * path in another encoding) as U+FFFD, so that every line parses. */
static void json_string(FILE *j, const char *s)
{
    fputc('"', j);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(j, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(j, "\\u%04x", *p);
        } else if (*p >= 0x80) {
            size_t n = utf8_length(p);
            if (n == 0) {
                fputs("\\ufffd", j);
            } else {
                fwrite(p, 1, n, j);
                p += n - 1;
            }
        } else {
            fputc(*p, j);
        }
    }
    fputc('"', j);
}

static void write_json(struct hs_report_stream *rs, const struct group *g, const struct finding *f)
{
    FILE *j = rs->o.json;
    fprintf(j, "{\"kind\":\"%s\",\"program\":", kind_names[f->kind]);
    json_string(j, g->program);
    /* Lines without a prefix (the report `leaks -p` reads) are program_pid's. */
    fprintf(j, ",\"pid\":%ld,\"message\":", g->pid ? g->pid : rs->o.program_pid);
    json_string(j, f->message ? f->message : "");
    fputs(",\"address\":", j);
    if (f->address)
        json_string(j, f->address);
    else
        fputs("null", j);
    fprintf(j, ",\"size\":%" PRIu64 ",\"frames\":[", f->size);
    for (size_t i = 0; i < f->num_frames; i++) {
        const struct frame *fr = &f->frames[i];
        fprintf(j, "%s{\"stack\":", i ? "," : "");
        if (fr->stack) /* the backtrace's title; memunreachable's have none */
            json_string(j, fr->stack);
        else
            fputs("null", j);
        fprintf(j, ",\"index\":%u,\"pc\":\"0x%" PRIx64 "\",\"module\":", fr->index, fr->rel_pc);
        json_string(j, fr->module);
        fputs(",\"function\":", j);
        json_string(j, fr->demangled[0] ? fr->demangled : fr->function);
        fputs(",\"symbol\":", j);
        json_string(j, fr->function);
        fputs(",\"file\":", j);
        json_string(j, fr->file);
        fprintf(j, ",\"line\":%u,\"inlined\":[", fr->line);
        for (size_t k = 0; k < fr->num_inlined; k++) {
            fprintf(j, "%s{\"function\":", k ? "," : "");
            json_string(j, fr->inlined[k].function);
            fputs(",\"file\":", j);
            json_string(j, fr->inlined[k].file);
            fprintf(j, ",\"line\":%u}", fr->inlined[k].line);
        }
        fputs("]}", j);
    }
    fputs("],\"text\":[", j);
    for (size_t i = 0; i < f->text.n; i++) {
        if (i)
            fputc(',', j);
        json_string(j, f->text.v[i]);
    }
    fputs("]}\n", j);
    fflush(j);
}

/* The names a suppression pattern is matched against: every frame's function (mangled and
 * demangled, inlined ones too), source file and module. */
static bool suppressed(struct hs_report_stream *rs, const struct finding *f)
{
    struct hs_supp_set *set = rs->o.supp;
    if (!set || set->count == 0 || f->fault)
        return false;
    enum hs_supp_kind kind = f->kind == K_ERROR ? HS_SUPP_ERROR : HS_SUPP_LEAK;
    for (size_t i = 0; i < f->num_frames; i++) {
        const struct frame *fr = &f->frames[i];
        const char *names[4] = {fr->function, fr->demangled, fr->file, fr->module};
        struct hs_supp_rule *rule = hs_supp_match(set, kind, names, 4);
        for (size_t k = 0; !rule && k < fr->num_inlined; k++) {
            const char *inl[2] = {fr->inlined[k].function, fr->inlined[k].file};
            rule = hs_supp_match(set, kind, inl, 2);
        }
        if (rule) {
            /* A summary entry's blocks are counted with the blocks themselves. */
            if (f->kind != K_LEAK_STACK)
                hs_supp_count(rule, f->size);
            return true;
        }
    }
    return false;
}

static void close_finding(struct hs_report_stream *rs, struct group *g)
{
    struct finding *f = &g->f;
    if (f->kind == K_NONE)
        return;
    if (!suppressed(rs, f)) {
        rs->findings++;
        for (size_t i = 0; i < f->text.n; i++) /* empty unless held (rs->hold) */
            emit_str(rs, g, f->text.v[i]);
        if (rs->o.json)
            write_json(rs, g, f);
    }
    finding_clear(f);
}

/* The log file of process pid (o.log_pattern, "%p" its pid), opened on its first line.
 * When it cannot be opened, that is said once and the sink writes to stderr; a file that
 * fails later (a full disk) is said once too, and stderr takes over (flush_out). */
static struct sink *open_process_sink(struct hs_report_stream *rs, long pid)
{
    char path[PATH_MAX];
    size_t n = 0;
    for (const char *p = rs->o.log_pattern; *p && n + 24 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%ld", pid);
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr,
                "%s: cannot write the log file %s: %s; reports go to stderr from now "
                "on\n",
                rs->o.command, path, strerror(errno));
        fd = STDERR_FILENO;
    }
    struct sink *k = xmalloc(sizeof(*k));
    k->pid = pid;
    k->fd = fd;
    k->name = fd == STDERR_FILENO ? NULL : xstrdup(path);
    k->len = 0;
    return k;
}

/* Lines go to o.out, or with o.log_pattern to the log file of their process. */
static struct sink *sink_of(struct hs_report_stream *rs, struct group *g)
{
    if (!rs->o.log_pattern)
        return &rs->main;
    long pid = g && g->pid ? g->pid : rs->o.program_pid;
    for (size_t i = 0; i < rs->num_procs; i++)
        if (rs->procs[i]->pid == pid)
            return rs->procs[i];
    struct sink *k = open_process_sink(rs, pid);
    struct sink **v = realloc(rs->procs, (rs->num_procs + 1) * sizeof(*v));
    if (!v) {
        fputs("heapscope: out of memory\n", stderr);
        exit(1);
    }
    rs->procs = v;
    rs->procs[rs->num_procs++] = k;
    return k;
}

static void flush_all(struct hs_report_stream *rs)
{
    flush_out(rs, &rs->main);
    for (size_t i = 0; i < rs->num_procs; i++)
        flush_out(rs, rs->procs[i]);
}

/* ---- lines ---- */

/* Splits "prog[pid] tag: body" (log.h); returns the prefix length, "tag:" included with the
 * space after it when there is one, or 0 when the line has no prefix. */
static size_t prefix_len(const char *line, size_t len, long *pid, size_t *prog_len)
{
    for (size_t i = 1; i < len && i < 300; i++) {
        if (line[i] != '[')
            continue;
        size_t j = i + 1;
        long v = 0;
        while (j < len && j < i + 12 && line[j] >= '0' && line[j] <= '9')
            v = v * 10 + (line[j++] - '0');
        if (j == i + 1 || j + 1 >= len || line[j] != ']' || line[j + 1] != ' ')
            continue;
        size_t tag = j + 2;
        j = tag;
        while (j < len && ((line[j] >= 'a' && line[j] <= 'z') || line[j] == '_'))
            j++;
        if (j == tag || j >= len || line[j] != ':')
            continue;
        *pid = v;
        *prog_len = i;
        return j + 1 < len && line[j + 1] == ' ' ? j + 2 : j + 1;
    }
    return 0;
}

static struct group *group_of(struct hs_report_stream *rs, const char *line, size_t plen,
                              size_t prog_len, long pid)
{
    for (size_t i = 0; i < rs->num_groups; i++) {
        struct group *g = &rs->groups[i];
        if (g->plen == plen && memcmp(g->prefix, line, plen) == 0) {
            g->age = ++rs->clock;
            return g;
        }
    }
    struct group *g;
    if (rs->num_groups < MAX_GROUPS) {
        g = &rs->groups[rs->num_groups++];
    } else {
        g = &rs->groups[0];
        for (size_t i = 1; i < MAX_GROUPS; i++)
            if (rs->groups[i].age < g->age)
                g = &rs->groups[i];
        close_finding(rs, g);
        free(g->prefix);
        free(g->program);
    }
    memset(g, 0, sizeof(*g));
    g->prefix = xstrndup(line, plen);
    g->plen = plen;
    g->program = xstrndup(line, prog_len);
    g->pid = pid;
    g->age = ++rs->clock;
    return g;
}

static bool starts(const char *s, size_t len, const char *with)
{
    size_t n = strlen(with);
    return len >= n && memcmp(s, with, n) == 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Writes one output line, or keeps it in the open finding when the finding's lines wait for
 * its end (suppressions to decide, or JSON to write them). */
static void put(struct hs_report_stream *rs, struct group *g, const char *line, size_t len)
{
    if (rs->hold && g && g->f.kind != K_NONE) {
        lines_add(&g->f.text, xstrndup(line, len));
        return;
    }
    emit(rs, g, line, len);
}

/* A frame line: symbolized, put out (inlined lines first), and recorded in the finding. */
static void frame_line(struct hs_report_stream *rs, struct group *g, const char *line, size_t len,
                       size_t plen, const struct hs_frame_line *fl)
{
    struct hs_frame_info info[HS_SYMBOLIZE_MAX_FRAMES];
    size_t n = 0;
    if (rs->o.symbolize && !rs->failed_symbolizer) {
        if (!rs->fs && !(rs->fs = hs_frame_source_new())) {
            rs->failed_symbolizer = true;
            fprintf(stderr, "heapscope: cannot start the symbolizer; frames are left as they "
                            "are\n");
        }
        if (rs->fs)
            n = hs_frame_source_lookup(rs->fs, fl, info, HS_SYMBOLIZE_MAX_FRAMES);
    }
    char out[2 * HS_LINE_MAX];
    for (size_t i = 0; i + 1 < n; i++) {
        const char *fn = info[i].demangled[0] ? info[i].demangled : info[i].function;
        int k = snprintf(out, sizeof(out), "%.*s%*s#%02u  (inlined)           %s %s:%u", (int)plen,
                         line, (int)fl->indent, "", fl->index, fn[0] ? fn : "??",
                         base_name(info[i].file), info[i].line);
        put(rs, g, out, k < 0 ? 0 : (size_t)k < sizeof(out) ? (size_t)k : sizeof(out) - 1);
    }
    const struct hs_frame_info *real = n ? &info[n - 1] : NULL;
    if (real && real->line) {
        int k = snprintf(out, sizeof(out), "%.*s %s:%u", (int)len, line, base_name(real->file),
                         real->line);
        put(rs, g, out, k < 0 ? 0 : (size_t)k < sizeof(out) ? (size_t)k : sizeof(out) - 1);
    } else {
        put(rs, g, line, len);
    }

    /* The frame, for the suppressions and the JSON file. */
    if (!rs->hold || !g || g->f.kind == K_NONE)
        return;
    struct finding *f = &g->f;
    if (f->num_frames == f->cap_frames) {
        f->cap_frames = f->cap_frames ? f->cap_frames * 2 : 16;
        struct frame *v = realloc(f->frames, f->cap_frames * sizeof(*v));
        if (!v) {
            fputs("heapscope: out of memory\n", stderr);
            exit(1);
        }
        f->frames = v;
    }
    struct frame *fr = &f->frames[f->num_frames++];
    memset(fr, 0, sizeof(*fr));
    fr->stack = f->stack ? xstrdup(f->stack) : NULL;
    fr->index = fl->index;
    fr->rel_pc = fl->rel_pc;
    fr->module = xstrndup(fl->path, fl->path_len);
    fr->function = fl->function ? xstrndup(fl->function, fl->function_len) : xstrdup("");
    fr->demangled = xstrdup(real ? real->demangled : "");
    fr->file = xstrdup(real ? real->file : "");
    fr->line = real ? real->line : 0;
    if (n > 1) {
        fr->inlined = xmalloc((n - 1) * sizeof(struct inl));
        for (size_t i = 0; i + 1 < n; i++)
            fr->inlined[i] =
                (struct inl){xstrdup(info[i].demangled[0] ? info[i].demangled : info[i].function),
                             xstrdup(info[i].file), info[i].line};
        fr->num_inlined = n - 1;
    }
}

/* "+++ ALLOCATION 0x... SIZE 14 ..." or "... at 0xADDR": the address and the size. */
static void parse_address_size(struct finding *f, const char *body, size_t len)
{
    const char *s = body, *end = body + len;
    const char *hex = NULL;
    for (const char *p = s; p + 2 < end; p++)
        if (p[0] == '0' && p[1] == 'x' && (p == s || p[-1] == ' ')) {
            hex = p;
            break;
        }
    if (hex) {
        const char *e = hex + 2;
        while (e < end && ((*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'f')))
            e++;
        f->address = xstrndup(hex, (size_t)(e - hex));
    }
    const char *size = memmem(body, len, " SIZE ", 6);
    if (size)
        f->size = strtoull(size + 6, NULL, 10);
}

static void open_finding(struct group *g, enum kind kind)
{
    g->f.kind = kind;
}

static bool digits_then(const char *s, size_t len, const char *then, uint64_t *value)
{
    size_t i = 0;
    uint64_t v = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        v = v * 10 + (uint64_t)(s[i++] - '0');
    if (i == 0 || !starts(s + i, len - i, then))
        return false;
    *value = v;
    return true;
}

static void handle_line(struct hs_report_stream *rs, const char *line, size_t len)
{
    long pid = 0;
    size_t prog_len = 0;
    size_t plen = prefix_len(line, len, &pid, &prog_len);
    struct group *g = group_of(rs, line, plen, prog_len, pid);
    const char *body = line + plen;
    size_t blen = len - plen;
    struct hs_frame_line fl;
    bool is_frame = hs_frame_line_parse(body, blen, &fl);
    struct finding *f = &g->f;

    if (blen == sizeof(DIVIDER) - 1 && memcmp(body, DIVIDER, blen) == 0) {
        if (f->kind == K_ERROR) {
            put(rs, g, line, len);
            close_finding(rs, g);
            return;
        }
        close_finding(rs, g);
        open_finding(g, K_ERROR);
        put(rs, g, line, len);
        return;
    }
    if (f->kind == K_ERROR) {
        if (is_frame) {
            frame_line(rs, g, line, len, plen, &fl);
            return;
        }
        if (!f->message && starts(body, blen, "+++ ")) {
            f->message = xstrndup(body + 4, blen - 4);
            parse_address_size(f, body, blen);
            f->fault |= memmem(body, blen, " IS GUARDED MEMORY ", 19) != NULL;
        } else if (starts(body, blen, "  read of allocation[") ||
                   starts(body, blen, "  write of allocation[") ||
                   starts(body, blen, "  access of allocation[")) {
            /* guard_report.c's fault report: the program does not go on past it (the
             * signal kills it), so a suppressed one would be a crash without a word. */
            f->fault = true;
        } else if (blen > 0 && body[blen - 1] == ':') {
            free(f->stack);
            f->stack = xstrndup(body, blen - 1);
        }
        put(rs, g, line, len);
        return;
    }
    if (f->kind == K_LEAK || f->kind == K_LEAK_STACK) {
        if (is_frame) {
            frame_line(rs, g, line, len, plen, &fl);
            return;
        }
        if (starts(body, blen, "Backtrace at time of allocation:")) {
            free(f->stack);
            f->stack = xstrndup(body, blen - 1);
            put(rs, g, line, len);
            return;
        }
        close_finding(rs, g);
    } else if (f->kind == K_UNREACHABLE) {
        if (is_frame) {
            frame_line(rs, g, line, len, plen, &fl);
            return;
        }
        if (starts(body, blen, "   ")) {
            put(rs, g, line, len);
            return;
        }
        close_finding(rs, g);
    }

    /* Outside a finding: does this line open one? */
    uint64_t v;
    if (starts(body, blen, "+++ ") && memmem(body, blen, " leaked block of size ", 22) &&
        memmem(body, blen, " (leak ", 7)) {
        open_finding(g, K_LEAK);
        f->message = xstrndup(body + 4, blen - 4);
        const char *sz = memmem(body, blen, " leaked block of size ", 22);
        f->size = strtoull(sz + 22, NULL, 10);
        const char *at = memmem(body, blen, " at 0x", 6);
        if (at)
            parse_address_size(f, at + 4, (size_t)(body + blen - at - 4));
    } else if (starts(body, blen, "+++ ") && digits_then(body + 4, blen - 4, " block", &v) &&
               memmem(body, blen, ", stack ", 8) && body[blen - 1] == ':') {
        open_finding(g, K_LEAK_STACK);
        f->message = xstrndup(body + 4, blen - 5);
        const char *paren = memmem(body, blen, " (", 2);
        f->size = paren ? strtoull(paren + 2, NULL, 10) : 0;
    } else if (starts(body, blen, "  ") &&
               digits_then(body + 2, blen - 2, " bytes unreachable at ", &v)) {
        open_finding(g, K_UNREACHABLE);
        f->message = xstrndup(body + 2, blen - 2);
        f->size = v;
        /* "  N bytes unreachable at 55d3c8e7a2a0": the address in hex, without "0x". */
        const char *hex = memmem(body, blen, " at ", 4) + 4;
        size_t n = (size_t)(body + blen - hex);
        char addr[40];
        snprintf(addr, sizeof(addr), "0x%.*s", (int)(n < 32 ? n : 32), hex);
        f->address = xstrdup(addr);
    }
    if (is_frame)
        frame_line(rs, g, line, len, plen, &fl);
    else
        put(rs, g, line, len);
}

void hs_report_stream_feed(struct hs_report_stream *rs, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) : len;
        if (!nl) {
            if (rs->partial_len + n > rs->partial_cap) {
                rs->partial_cap = (rs->partial_len + n) * 2;
                char *p = realloc(rs->partial, rs->partial_cap);
                if (!p) {
                    fputs("heapscope: out of memory\n", stderr);
                    exit(1);
                }
                rs->partial = p;
            }
            memcpy(rs->partial + rs->partial_len, data, n);
            rs->partial_len += n;
            break;
        }
        if (rs->partial_len) {
            char *whole = xmalloc(rs->partial_len + n);
            memcpy(whole, rs->partial, rs->partial_len);
            memcpy(whole + rs->partial_len, data, n);
            size_t wlen = rs->partial_len + n;
            rs->partial_len = 0;
            handle_line(rs, whole, wlen);
            free(whole);
        } else {
            handle_line(rs, data, n);
        }
        data += n + 1;
        len -= n + 1;
    }
    flush_all(rs);
}

static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

void hs_report_stream_finish(struct hs_report_stream *rs)
{
    if (rs->partial_len) {
        size_t n = rs->partial_len;
        rs->partial_len = 0;
        handle_line(rs, rs->partial, n);
    }
    for (size_t i = 0; i < rs->num_groups; i++)
        close_finding(rs, &rs->groups[i]);
    struct hs_supp_set *set = rs->o.supp;
    if (set && set->count) {
        bool any = false;
        for (size_t i = 0; i < set->count; i++) {
            const struct hs_supp_rule *r = &set->rules[i];
            if (!r->hits)
                continue;
            any = true;
            char line[1024];
            int n = snprintf(line, sizeof(line),
                             "%s: suppressed %" PRIu64 " %s%s (%" PRIu64 " bytes) with %s:%s "
                             "(%s:%u)",
                             rs->o.command, r->hits, hs_supp_kind_name(r->kind), plural(r->hits),
                             r->bytes, hs_supp_kind_name(r->kind), r->pattern, rs->o.supp_path,
                             r->line);
            emit(rs, NULL, line, n > 0 && (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
        }
        if (!any) {
            char line[PATH_MAX + 128];
            snprintf(line, sizeof(line), "%s: no finding matched the suppressions of %s",
                     rs->o.command, rs->o.supp_path);
            emit_str(rs, NULL, line);
        }
    }
    flush_all(rs);
}

void hs_report_stream_free(struct hs_report_stream *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->num_groups; i++) {
        struct group *g = &rs->groups[i];
        finding_clear(&g->f);
        free(g->f.text.v);
        free(g->f.frames);
        free(g->prefix);
        free(g->program);
    }
    for (size_t i = 0; i < rs->num_procs; i++) {
        if (rs->procs[i]->fd != STDERR_FILENO)
            close(rs->procs[i]->fd);
        free(rs->procs[i]->name);
        free(rs->procs[i]);
    }
    free(rs->procs);
    free(rs->partial);
    hs_frame_source_free(rs->fs);
    free(rs);
}
