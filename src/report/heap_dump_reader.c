/* heap_dump_reader.c: the Android native heap dump parser (see heap_dump_reader.h). */
#include "heap_dump_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER "Android Native Heap Dump v1."
#define MAX_FRAMES 4096 /* per record; Android's limit is 256 */

struct parser {
    const char *p, *end;
    size_t line_no;
    char *err;
    size_t err_cap;
    bool out_of_memory; /* the failure was for want of memory (errno ENOMEM) */
};

static int fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parser *ps, const char *fmt, ...)
{
    int n = snprintf(ps->err, ps->err_cap, "line %zu: ", ps->line_no);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->err_cap)
        vsnprintf(ps->err + n, ps->err_cap - (size_t)n, fmt, ap);
    va_end(ap);
    errno = EINVAL;
    return -1;
}

/* The failure for want of memory. */
static int fail_nomem(struct parser *ps)
{
    ps->out_of_memory = true;
    return fail(ps, "out of memory");
}

/* The next line (without its newline) in [*line, *len); false at the end. */
static bool next_line(struct parser *ps, const char **line, size_t *len)
{
    if (ps->p >= ps->end)
        return false;
    const char *nl = memchr(ps->p, '\n', (size_t)(ps->end - ps->p));
    *line = ps->p;
    *len = nl ? (size_t)(nl - ps->p) : (size_t)(ps->end - ps->p);
    ps->p = nl ? nl + 1 : ps->end;
    ps->line_no++;
    return true;
}

static bool starts_with(const char *line, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(line, prefix, n) == 0;
}

/* Parses an unsigned number at *s (base 10 or 16) up to end; advances *s. */
static bool parse_number(const char **s, const char *end, int base, uint64_t *out)
{
    const char *q = *s;
    uint64_t v = 0;
    bool any = false;
    for (; q < end; q++) {
        int d;
        if (*q >= '0' && *q <= '9')
            d = *q - '0';
        else if (base == 16 && *q >= 'a' && *q <= 'f')
            d = *q - 'a' + 10;
        else if (base == 16 && *q >= 'A' && *q <= 'F')
            d = *q - 'A' + 10;
        else
            break;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
        any = true;
    }
    if (!any)
        return false;
    *s = q;
    *out = v;
    return true;
}

static void skip_spaces(const char **s, const char *end)
{
    while (*s < end && **s == ' ')
        (*s)++;
}

/* Expects `word` at *s after optional spaces. */
static bool expect_word(const char **s, const char *end, const char *word)
{
    skip_spaces(s, end);
    size_t n = strlen(word);
    if ((size_t)(end - *s) < n || memcmp(*s, word, n) != 0)
        return false;
    *s += n;
    return true;
}

static char *copy_text(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

/* "z 0  sz      400  num    1  bt a230 b500" */
static int parse_record(struct parser *ps, const char *line, size_t len, struct hs_dump *d,
                        size_t *frames_used, size_t *frames_cap, size_t *records_cap)
{
    const char *s = line, *end = line + len;
    uint64_t zygote, size, num;
    if (!expect_word(&s, end, "z") || !(skip_spaces(&s, end), parse_number(&s, end, 10, &zygote)))
        return fail(ps, "expected 'z <0|1>' at the start of an allocation record");
    if (!expect_word(&s, end, "sz") || !(skip_spaces(&s, end), parse_number(&s, end, 10, &size)))
        return fail(ps, "expected 'sz <size>' after 'z %llu'", (unsigned long long)zygote);
    if (!expect_word(&s, end, "num") || !(skip_spaces(&s, end), parse_number(&s, end, 10, &num)))
        return fail(ps, "expected 'num <count>' after the size");
    if (!expect_word(&s, end, "bt"))
        return fail(ps, "expected 'bt' and frames after the count");
    if (d->num_records == *records_cap) {
        size_t cap = *records_cap ? *records_cap * 2 : 1024;
        struct hs_dump_record *r = realloc(d->records, cap * sizeof(*r));
        if (!r)
            return fail_nomem(ps);
        d->records = r;
        *records_cap = cap;
    }
    size_t first = *frames_used;
    uint32_t n = 0;
    for (;;) {
        skip_spaces(&s, end);
        if (s >= end)
            break;
        uint64_t pc;
        if (!parse_number(&s, end, 16, &pc) || (s < end && *s != ' '))
            return fail(ps, "expected a hexadecimal frame address in the backtrace, found '%.*s'",
                        (int)(end - s > 20 ? 20 : end - s), s);
        if (n == MAX_FRAMES)
            return fail(ps, "more than %d frames in one backtrace", MAX_FRAMES);
        if (*frames_used == *frames_cap) {
            size_t cap = *frames_cap ? *frames_cap * 2 : 16384;
            uint64_t *f = realloc(d->frame_pool, cap * sizeof(*f));
            if (!f)
                return fail_nomem(ps);
            d->frame_pool = f;
            *frames_cap = cap;
        }
        d->frame_pool[(*frames_used)++] = pc;
        n++;
    }
    /* Frames are stored as offsets until the pool stops moving (fixed up at the end). */
    d->records[d->num_records++] =
        (struct hs_dump_record){size, num, n, (uint64_t *)(uintptr_t)first};
    return 0;
}

int hs_dump_parse(const char *data, size_t len, struct hs_dump *d, char *err, size_t err_cap)
{
    memset(d, 0, sizeof(*d));
    struct parser ps = {data, data + len, 0, err, err_cap, false};
    const char *line;
    size_t n;
    if (!next_line(&ps, &line, &n) || !starts_with(line, n, HEADER) || n != strlen(HEADER) + 1 ||
        line[n - 1] < '0' || line[n - 1] > '2') {
        ps.line_no = 1;
        return fail(&ps, "not an Android native heap dump: expected '%s0', '%s1' or '%s2'", HEADER,
                    HEADER, HEADER);
    }
    d->version_minor = line[n - 1] - '0';
    size_t frames_used = 0, frames_cap = 0, records_cap = 0;
    bool in_maps = false, ended = false;
    const char *maps_start = NULL;
    int rc = 0;
    while (rc == 0 && !ended && next_line(&ps, &line, &n)) {
        if (in_maps) {
            if (n == 3 && memcmp(line, "END", 3) == 0) {
                d->maps_len = (size_t)(line - maps_start);
                ended = true;
            }
            continue;
        }
        const char *s = line, *end = line + n;
        uint64_t v = 0;
        if (n == 0 || starts_with(line, n, "  bt_info")) {
            continue;
        } else if (starts_with(line, n, "Build fingerprint: ")) {
            const char *f = line + strlen("Build fingerprint: ");
            size_t fl = (size_t)(end - f);
            if (fl >= 2 && f[0] == '\'' && f[fl - 1] == '\'')
                f++, fl -= 2;
            free(d->fingerprint);
            d->fingerprint = copy_text(f, fl);
        } else if (starts_with(line, n, "Total memory: ")) {
            s += strlen("Total memory: ");
            if (!parse_number(&s, end, 10, &v) || s != end)
                rc = fail(&ps, "expected a number after 'Total memory: '");
            d->total_memory = v;
        } else if (starts_with(line, n, "Allocation records: ")) {
            s += strlen("Allocation records: ");
            if (!parse_number(&s, end, 10, &v) || s != end)
                rc = fail(&ps, "expected a number after 'Allocation records: '");
        } else if (starts_with(line, n, "Backtrace size: ")) {
            s += strlen("Backtrace size: ");
            if (!parse_number(&s, end, 10, &v) || s != end)
                rc = fail(&ps, "expected a number after 'Backtrace size: '");
            d->backtrace_size = v;
        } else if (starts_with(line, n, "z ")) {
            rc = parse_record(&ps, line, n, d, &frames_used, &frames_cap, &records_cap);
        } else if (n == 4 && memcmp(line, "MAPS", 4) == 0) {
            in_maps = true;
            maps_start = ps.p;
        } else {
            rc = fail(&ps,
                      "unexpected line '%.*s': expected a header line, an allocation record "
                      "('z ...'), 'MAPS' or a blank line",
                      (int)(n > 40 ? 40 : n), line);
        }
    }
    if (rc == 0 && in_maps && !ended) {
        d->maps_len = (size_t)(ps.end - maps_start);
        rc = fail(&ps, "the MAPS section has no 'END' line (truncated dump?)");
    }
    if (rc == 0 && !in_maps)
        rc = fail(&ps, "no MAPS section: the dump is truncated or not a heap dump");
    if (rc == 0) {
        d->maps = copy_text(maps_start, d->maps_len);
        if (!d->fingerprint)
            d->fingerprint = copy_text("", 0);
        if (!d->maps || !d->fingerprint)
            rc = fail_nomem(&ps);
    }
    if (rc != 0) {
        hs_dump_free(d);
        errno = ps.out_of_memory ? ENOMEM : EINVAL;
        return -1;
    }
    for (size_t i = 0; i < d->num_records; i++)
        d->records[i].frames = d->frame_pool + (uintptr_t)d->records[i].frames;
    return 0;
}

int hs_dump_read_file(const char *path, struct hs_dump *out, char *err, size_t err_cap)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, err_cap, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, err_cap, "%s: is a directory, not a heap dump", path);
        close(fd);
        return -1;
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size : 65536, len = 0;
    char *data = malloc(cap + 1);
    ssize_t r = 0;
    while (data && (r = read(fd, data + len, cap - len)) > 0) {
        len += (size_t)r;
        if (len == cap) {
            char *bigger = realloc(data, cap * 2 + 1);
            if (!bigger) {
                free(data);
                data = NULL;
                break;
            }
            data = bigger;
            cap *= 2;
        }
    }
    int read_errno = r < 0 ? errno : 0;
    close(fd);
    if (!data) {
        snprintf(err, err_cap, "%s: out of memory", path);
        errno = ENOMEM;
        return -1;
    }
    if (read_errno != 0) {
        snprintf(err, err_cap, "%s: %s", path, strerror(read_errno));
        free(data);
        errno = read_errno;
        return -1;
    }
    char inner[512];
    int rc = hs_dump_parse(data, len, out, inner, sizeof(inner));
    int saved = errno;
    free(data);
    if (rc != 0)
        snprintf(err, err_cap, "%s: %s", path, inner);
    errno = saved;
    return rc;
}

void hs_dump_free(struct hs_dump *d)
{
    free(d->fingerprint);
    free(d->records);
    free(d->maps);
    free(d->frame_pool);
    memset(d, 0, sizeof(*d));
}
