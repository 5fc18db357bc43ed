/* proc_maps.c: allocation-free /proc/<pid>/maps reader (see proc_maps.h).
 *
 * The parser is a character-at-a-time state machine that writes straight into the entry being
 * assembled, so it needs no line buffer: chunk boundaries and line lengths do not matter.
 */
#include "proc_maps.h"

#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

enum {
    S_START,  /* hex, ends with '-' */
    S_END,    /* hex, ends with ' ' */
    S_PERMS,  /* four characters, then ' ' */
    S_OFFSET, /* hex, ends with ' ' */
    S_MAJOR,  /* hex, ends with ':' */
    S_MINOR,  /* hex, ends with ' ' */
    S_INODE,  /* decimal, ends with ' ' or the newline */
    S_PAD,    /* spaces before the path */
    S_PATH,   /* everything up to the newline */
    S_BAD,    /* malformed: skip to the newline */
};

static const char k_deleted[] = " (deleted)";
/* Character ending each hex field, indexed by state. */
static const char k_terms[] = {'-', ' ', 0, ' ', ':', ' '};
/* The four permission characters when set, and their bits. */
static const char k_perm_chars[4] = {'r', 'w', 'x', 'p'};
static const unsigned k_perm_bits[4] = {HS_MAP_READ, HS_MAP_WRITE, HS_MAP_EXEC, HS_MAP_PRIVATE};

static void reset_line(struct hs_maps_parser *p)
{
    struct hs_map *m = p->m;
    p->state = S_START;
    p->digits = 0;
    p->value = 0;
    p->path_len = 0;
    m->start = m->end = 0;
    m->offset = 0;
    m->perms = 0;
    m->dev = 0;
    m->inode = 0;
    m->load_base = 0;
    m->deleted = false;
    m->path[0] = '\0';
}

void hs_maps_parser_init(struct hs_maps_parser *p, struct hs_map *scratch)
{
    p->m = scratch;
    p->dev_major = 0;
    p->run_valid = false;
    p->run_dev = 0;
    p->run_inode = 0;
    p->run_base = 0;
    reset_line(p);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Consumes one character of a hex field ending with `term`. Returns 1 when the field is
 * complete (value in p->value), 0 to go on, -1 when malformed. Leading spaces are skipped. */
static int hex_field(struct hs_maps_parser *p, char c, char term)
{
    if (c == term && p->digits > 0)
        return 1;
    if (c == ' ' && p->digits == 0)
        return 0;
    int d = hex_digit(c);
    if (d < 0 || p->digits >= 16)
        return -1;
    p->value = p->value << 4 | (uint64_t)d;
    p->digits++;
    return 0;
}

/* Finishes the current line: delivers it when complete, drops it otherwise. */
static int end_line(struct hs_maps_parser *p, hs_maps_fn fn, void *arg)
{
    struct hs_map *m = p->m;
    bool complete = false;
    if (p->state == S_INODE && p->digits > 0) {
        m->inode = p->value;
        complete = true;
    } else if (p->state == S_PAD || p->state == S_PATH) {
        complete = true;
    }
    if (!complete) {
        reset_line(p);
        return 0;
    }

    size_t len = p->path_len < PATH_MAX - 1 ? p->path_len : PATH_MAX - 1;
    m->path[len] = '\0';
    size_t suffix = sizeof(k_deleted) - 1;
    if (p->path_len == len && len > suffix &&
        memcmp(m->path + len - suffix, k_deleted, suffix) == 0) {
        m->path[len - suffix] = '\0';
        m->deleted = true;
    }

    if (m->inode != 0) {
        bool same_file = p->run_valid && p->run_dev == m->dev && p->run_inode == m->inode;
        if (!same_file || m->offset == 0) {
            p->run_valid = true;
            p->run_dev = m->dev;
            p->run_inode = m->inode;
            p->run_base = m->start - (uintptr_t)m->offset;
        }
        m->load_base = p->run_base;
    } else {
        m->load_base = m->start - (uintptr_t)m->offset;
    }

    int r = fn(m, arg);
    /* After a stop *m keeps the entry (hs_maps_find returns it); the parser is done. */
    if (r == 0)
        reset_line(p);
    return r;
}

int hs_maps_parser_feed(struct hs_maps_parser *p, const char *data, size_t len, hs_maps_fn fn,
                        void *arg)
{
    struct hs_map *m = p->m;
    for (size_t i = 0; i < len; i++) {
        char c = data[i];
        if (c == '\n') {
            int r = end_line(p, fn, arg);
            if (r != 0)
                return r;
            continue;
        }
        int done;
        switch (p->state) {
        case S_START:
        case S_END:
        case S_OFFSET:
        case S_MAJOR:
        case S_MINOR: {
            done = hex_field(p, c, k_terms[p->state]);
            if (done < 0) {
                p->state = S_BAD;
                break;
            }
            if (done == 0)
                break;
            switch (p->state) {
            case S_START:
                m->start = (uintptr_t)p->value;
                break;
            case S_END:
                m->end = (uintptr_t)p->value;
                if (m->end < m->start) {
                    p->state = S_BAD;
                    continue;
                }
                break;
            case S_OFFSET:
                m->offset = p->value;
                break;
            case S_MAJOR:
                if (p->value > 0xffffffffu) {
                    p->state = S_BAD;
                    continue;
                }
                p->dev_major = (unsigned)p->value;
                break;
            case S_MINOR:
                if (p->value > 0xffffffffu) {
                    p->state = S_BAD;
                    continue;
                }
                m->dev = makedev(p->dev_major, (unsigned)p->value);
                break;
            }
            p->state++;
            p->digits = 0;
            p->value = 0;
            break;
        }
        case S_PERMS:
            if (p->digits == 4) {
                p->state = c == ' ' ? S_OFFSET : S_BAD;
                p->digits = 0;
                p->value = 0;
                break;
            }
            if (c == ' ' && p->digits == 0)
                break;
            if (c == k_perm_chars[p->digits])
                m->perms |= k_perm_bits[p->digits];
            else if (!(c == '-' && p->digits < 3) && !(c == 's' && p->digits == 3))
                p->state = S_BAD;
            p->digits++;
            break;
        case S_INODE:
            if (c == ' ' && p->digits == 0)
                break;
            if (c == ' ') {
                m->inode = p->value;
                p->state = S_PAD;
                break;
            }
            if (c < '0' || c > '9' || p->value > (UINT64_MAX - (uint64_t)(c - '0')) / 10) {
                p->state = S_BAD;
                break;
            }
            p->value = p->value * 10 + (uint64_t)(c - '0');
            p->digits++;
            break;
        case S_PAD:
            if (c == ' ')
                break;
            p->state = S_PATH;
            /* fall through */
        case S_PATH:
            if (p->path_len < PATH_MAX - 1)
                m->path[p->path_len] = c;
            p->path_len++;
            break;
        default: /* S_BAD */
            break;
        }
    }
    return 0;
}

int hs_maps_parser_finish(struct hs_maps_parser *p, hs_maps_fn fn, void *arg)
{
    return end_line(p, fn, arg);
}

/* Reads fd to the end through a parser writing into scratch. */
static int parse_fd(int fd, struct hs_map *scratch, hs_maps_fn fn, void *arg)
{
    struct hs_maps_parser p;
    char buf[1024];
    hs_maps_parser_init(&p, scratch);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return hs_maps_parser_finish(&p, fn, arg);
        int r = hs_maps_parser_feed(&p, buf, (size_t)n, fn, arg);
        if (r != 0)
            return r;
    }
}

static int open_maps(pid_t pid)
{
    char path[64];
    if (pid == 0)
        hs_format(path, sizeof(path), "/proc/self/maps");
    else
        hs_format(path, sizeof(path), "/proc/%d/maps", (int)pid);
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd;
}

int hs_maps_foreach_fd(int fd, hs_maps_fn fn, void *arg)
{
    struct hs_map m;
    return parse_fd(fd, &m, fn, arg);
}

int hs_maps_foreach(pid_t pid, hs_maps_fn fn, void *arg)
{
    int fd = open_maps(pid);
    if (fd < 0)
        return -1;
    int r = hs_maps_foreach_fd(fd, fn, arg);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

static int find_cb(const struct hs_map *m, void *arg)
{
    uintptr_t addr = *(const uintptr_t *)arg;
    return addr >= m->start && addr < m->end;
}

bool hs_maps_find(pid_t pid, uintptr_t addr, struct hs_map *out)
{
    int fd = open_maps(pid);
    if (fd < 0)
        return false;
    /* Parse into *out directly: when the callback stops, out holds the match. */
    int r = parse_fd(fd, out, find_cb, &addr);
    int saved = errno;
    close(fd);
    errno = saved;
    return r == 1;
}
