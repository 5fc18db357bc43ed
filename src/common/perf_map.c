/* perf_map.c: JIT code names from /tmp/perf-PID.map (see perf_map.h). */
#include "perf_map.h"

#include "range_lookup.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct entry {
    uintptr_t start, end;
    size_t line;     /* line number: later lines win */
    size_t name_off; /* into names */
};

struct hs_perf_map {
    struct entry *entries;
    size_t count;
    char *names;
};

/* Reads a hex number (0x optional) at *p; false when there is none or it overflows. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    uint64_t v = 0;
    const char *digits = s;
    for (; s < end; s++) {
        int d = *s >= '0' && *s <= '9'   ? *s - '0'
                : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
                                         : -1;
        if (d < 0)
            break;
        if (v >> 60)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    if (s == digits)
        return false;
    *p = s;
    *out = v;
    return true;
}

static int by_start(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

struct hs_perf_map *hs_perf_map_parse(const char *text, size_t len)
{
    struct hs_perf_map *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    size_t cap = 0, names_len = 0, names_cap = 0, line_no = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        const char *s = p;
        p = eol + 1;
        line_no++;
        uint64_t start, size;
        if (!parse_hex(&s, eol, &start) || s == eol || *s++ != ' ' || !parse_hex(&s, eol, &size) ||
            s == eol || *s++ != ' ' || size == 0 || start + size < start)
            continue;
        size_t name_len = (size_t)(eol - s);
        if (name_len > HS_PERF_MAP_NAME_MAX)
            name_len = HS_PERF_MAP_NAME_MAX;
        if (m->count == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            struct entry *e = realloc(m->entries, ncap * sizeof(*e));
            if (e == NULL)
                goto fail;
            m->entries = e;
            cap = ncap;
        }
        if (names_cap - names_len < name_len + 1) {
            size_t ncap = names_cap ? names_cap * 2 : 4096;
            while (ncap - names_len < name_len + 1)
                ncap *= 2;
            char *n = realloc(m->names, ncap);
            if (n == NULL)
                goto fail;
            m->names = n;
            names_cap = ncap;
        }
        memcpy(m->names + names_len, s, name_len);
        m->names[names_len + name_len] = '\0';
        m->entries[m->count++] = (struct entry){start, start + size, line_no, names_len};
        names_len += name_len + 1;
    }
    if (m->count > 0)
        qsort(m->entries, m->count, sizeof(*m->entries), by_start);
    return m;
fail:
    hs_perf_map_free(m);
    return NULL;
}

static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL)
            break;
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            if (cap >= HS_PERF_MAP_MAX_BYTES)
                break;
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL)
                break;
            buf = bigger;
            cap *= 2;
        }
    }
    close(fd);
    *len = n;
    return buf;
}

struct hs_perf_map *hs_perf_map_load(pid_t pid)
{
    char path[96];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%d.map", (int)pid, (int)pid);
    char *text = read_file(path, &len);
    if (text == NULL) {
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
        text = read_file(path, &len);
    }
    if (text == NULL)
        return NULL;
    struct hs_perf_map *m = hs_perf_map_parse(text, len);
    free(text);
    return m;
}

const char *hs_perf_map_lookup(const struct hs_perf_map *m, uintptr_t pc)
{
    if (m == NULL || m->count == 0)
        return NULL;
    /* The last entry starting at or below pc, then back a little for overlapping ones. */
    size_t lo = hs_range_upper_bound(m->entries, m->count, pc, start);
    const struct entry *best = NULL;
    for (size_t i = lo, steps = 0; i > 0 && steps < 64; i--, steps++) {
        const struct entry *e = &m->entries[i - 1];
        if (pc >= e->start && pc < e->end && (best == NULL || e->line > best->line))
            best = e;
    }
    return best ? m->names + best->name_off : NULL;
}

size_t hs_perf_map_size(const struct hs_perf_map *m)
{
    return m ? m->count : 0;
}

void hs_perf_map_free(struct hs_perf_map *m)
{
    if (m == NULL)
        return;
    free(m->entries);
    free(m->names);
    free(m);
}
